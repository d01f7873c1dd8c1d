"""Prometheus text exposition parsing, enough for the kubelet's /metrics (counters and histograms)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Series that count: a counter or a histogram's buckets and count can be neither NaN nor negative; nor can the
# process start time the registration check compares (a NaN there would read as a kubelet restart, F11).
_COUNTING = ("_total", "_bucket", "_count", "process_start_time_seconds")

Sample = tuple[str, tuple[tuple[str, str], ...], float]


class Malformed(ValueError):
    """The text is not a Prometheus exposition a kubelet would serve (the message says where): its checks cannot
    judge anything from it, which is said (NOTCHECKED-OPTIONAL), never read as "no sample" (that would be F01)."""


def parse(text: str) -> list[Sample]:
    """The samples of a Prometheus text exposition. A line that is not a sample is passed over, but a page with no
    sample at all (an HTML error page behind a 200, binary junk), a bucket whose `le` is not a number, or a NaN or
    negative count raises Malformed: a kubelet always exports samples, and Prometheus rejects such a scrape."""
    out: list[Sample] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line.strip())
        if not m:
            continue
        labels = tuple(sorted(_LABEL.findall(m.group(3) or "")))
        try:
            value = float(m.group(4))
        except ValueError:
            continue
        name = m.group(1)
        if name.endswith(_COUNTING) and not value >= 0:
            raise Malformed(f"line {n}: {name} is {m.group(4)[:20]!r}, not a count")
        if name.endswith("_bucket"):
            le = dict(labels).get("le", "+Inf")
            try:
                if math.isnan(float(le)):
                    raise ValueError(le)
            except ValueError:
                raise Malformed(f"line {n}: {name} has bucket bound le={le[:20]!r}, not a number") from None
        out.append((name, labels, value))
    if not out:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        raise Malformed("no Prometheus sample in it" + (f" (first line {first[:60]!r})" if first else " (empty)"))
    return out


def value(samples: list[Sample], name: str, **labels: str) -> float | None:
    """Sum of the samples named `name` whose labels include `labels`; None when no sample matches."""
    found = [v for n, ls, v in samples if n == name and all((k, val) in ls for k, val in labels.items())]
    return sum(found) if found else None


@dataclass(frozen=True)
class Histogram:
    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), sorted, +Inf last
    count: float
    sum: float

    def minus(self, before: "Histogram | None") -> "Histogram":
        if before is None:
            return self
        b = dict(before.buckets)
        return Histogram(tuple((le, c - b.get(le, 0.0)) for le, c in self.buckets),
                         self.count - before.count, self.sum - before.sum)

    def quantile_upper_bound(self, q: float) -> float | None:
        """The upper bound of the bucket holding the q-quantile (what a bucketed histogram can promise)."""
        if self.count <= 0:
            return None
        rank = q * self.count
        for le, c in self.buckets:
            if c >= rank:
                return le
        return math.inf


def histogram(samples: list[Sample], name: str, **labels: str) -> Histogram | None:
    buckets: dict[float, float] = {}
    for n, ls, v in samples:
        if n == f"{name}_bucket" and all((k, val) in ls for k, val in labels.items()):
            le = dict(ls).get("le", "+Inf")
            bound = float(le)  # "+Inf" too; parse() refused any other text
            buckets[bound] = buckets.get(bound, 0.0) + v
    if not buckets:
        return None
    return Histogram(tuple(sorted(buckets.items())), value(samples, f"{name}_count", **labels) or 0.0,
                     value(samples, f"{name}_sum", **labels) or 0.0)
