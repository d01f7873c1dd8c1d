"""What a failed Kubernetes API request means, as pure functions of the error (unit-tested in
testing/unit/test_kube.py without a cluster):

- `should_retry`: may the request be repeated? Only what is safe to repeat is (the rule is in its docstring);
  gpuconform/kube.py's client applies it to every request, under a deadline.
- `api_error`: what the failure is called: ERROR-AUTH for rejected credentials (401), ERROR-RBAC for a missing
  permission (403 from the authorizer), ERROR-API for everything else with a message that says which (server
  unreachable: refused, DNS, connect timeout; no answer in time; connection dropped; TLS; refused by admission;
  HTTP status).
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from typing import Any, Iterator

import urllib3
from kubernetes.client.exceptions import ApiException

from . import timing
from .reasons import EnvironmentProblem

TRANSIENT_STATUS = {429, 500, 502, 503, 504}
#: Idempotent methods (RFC 9110 section 9.2.2): repeating one has the effect of sending it once.
IDEMPOTENT_METHODS = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}
#: POSTs that store nothing (access reviews are questions): as safe to repeat as a GET.
_STATELESS_POST = re.compile(r"/(self)?(subjectaccess|subjectrules|localsubjectaccess|token)reviews$")

# The request never left this machine (refused, no route, name not resolved, connect timeout): safe to resend.
_NOT_SENT = (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError)
# The request may have reached the server, which may have acted on it (read timeout, reset, dropped connection).
_MAYBE_SENT = (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError, ConnectionError,
               urllib3.exceptions.TimeoutError)


def _cause(exc: BaseException) -> BaseException:
    """MaxRetryError (urllib3 with retries configured) wraps the real error."""
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return exc.reason
    return exc


def not_sent(exc: BaseException) -> bool:
    return isinstance(_cause(exc), _NOT_SENT)


def maybe_sent(exc: BaseException) -> bool:
    return not not_sent(exc) and isinstance(_cause(exc), _MAYBE_SENT)


def repeatable(method: str, path: str) -> bool:
    """Sending the request twice has the effect of sending it once."""
    return method.upper() in IDEMPOTENT_METHODS or (method.upper() == "POST" and bool(_STATELESS_POST.search(path)))


def retry_after(exc: BaseException) -> float | None:
    """The server's Retry-After in seconds (capped), or None."""
    headers = getattr(exc, "headers", None) or {}
    ra = headers.get("Retry-After") if hasattr(headers, "get") else None
    if ra is not None and str(ra).strip().isdigit():
        return min(float(ra), timing.API_RETRY_AFTER_MAX_S)
    return None


def should_retry(method: str, path: str, exc: BaseException, named_create: bool = False) -> bool:
    """Whether a failed attempt may be repeated. The rule (client-go's, rest/request.go and rest/with_retry.go,
    plus one safe case for creates):

    - 429, and any 5xx that carries Retry-After: the server says it did not act on the request (API Priority
      and Fairness, max-in-flight, shutting down); any method is repeated, as client-go does.
    - a connection that was never made (refused, DNS, connect timeout): nothing was sent; any method.
    - a 5xx without Retry-After, a read timeout, a reset or a dropped connection: the server may have acted.
      Repeated only for repeatable requests (idempotent methods, access reviews) and for the create of a
      NAMED object (`named_create`): the repeat either creates it or gets 409 AlreadyExists, which the client
      resolves by reading the object and accepting it only when it carries every label of the one sent (the
      suite's objects carry the run's unique id, so nobody else's object is taken for ours).
    - anything else (401, 403, 404, 409, 422, TLS errors, bad requests) is permanent: raised at once.
    """
    if isinstance(exc, ApiException):
        if exc.status == 429 or (exc.status in TRANSIENT_STATUS and retry_after(exc) is not None):
            return True
        if exc.status in TRANSIENT_STATUS:
            return repeatable(method, path) or named_create
        return False
    if not_sent(exc):
        return True
    if maybe_sent(exc):
        return repeatable(method, path) or named_create
    return False


def created_name(method: str, path: str, body: Any) -> str | None:
    """The name of the object a POST creates, when it has one (not generateName, not a subresource)."""
    if method.upper() != "POST" or not isinstance(body, dict) or _STATELESS_POST.search(path):
        return None
    meta = body.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


def http_error(resp: Any) -> ApiException:
    """The ApiException subclass the generated client would raise for this non-2xx response."""
    text = resp.data.decode("utf-8", errors="replace") if isinstance(resp.data, bytes) else None
    try:
        ApiException.from_response(http_resp=resp, body=text, data=None)
    except ApiException as e:
        return e
    return ApiException(http_resp=resp)  # pragma: no cover - from_response always raises



#: Statuses that repeating the same request will not cure (credentials, permission, not found): a watch that gets
#: one stops and reports it.
PERMANENT_STATUS = {401, 403, 404}


def is_permanent(exc: BaseException) -> bool:
    """An error that repeating the same request will not cure (credentials, permission, not found)."""
    return isinstance(exc, ApiException) and exc.status in PERMANENT_STATUS


def status_message(exc: ApiException) -> str:
    """The Status message the API server sent (JSON body), else the raw body, short."""
    body = exc.body if isinstance(exc.body, str) else ""
    try:
        msg = json.loads(body).get("message") if body else None
    except (ValueError, AttributeError):
        msg = None
    return (msg or body or "")[:300]


def _transport(exc: BaseException) -> str:
    """What went wrong on the way to the server, in words."""
    e = _cause(exc)
    text = str(e)
    if isinstance(e, urllib3.exceptions.NameResolutionError) or "Name or service not known" in text:
        return "API server not reachable: its host name does not resolve"
    if isinstance(e, urllib3.exceptions.NewConnectionError):  # (a ConnectTimeoutError subclass in urllib3 2)
        if "refused" in text.lower():
            return "API server not reachable: connection refused"
        if "timed out" in text.lower():
            return "API server not reachable: connecting timed out"
        return "API server not reachable: the connection could not be made"
    if isinstance(e, urllib3.exceptions.ConnectTimeoutError):
        return "API server not reachable: connecting timed out"
    if isinstance(e, (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.TimeoutError)):
        return "the API server did not answer in time (request timeout)"
    if isinstance(e, (urllib3.exceptions.ProtocolError, ConnectionError)):
        return "the connection to the API server dropped"
    return "API call failed"


# The authorizer's wording (k8s.io/apiserver responsewriters.forbiddenMessage): 'User "u" cannot list resource
# "pods" ...' or '... cannot get path "/x"'. Other 403s come from admission (Pod Security, quota, webhooks).
_RBAC_DENIAL = re.compile(r"\bcannot \S+ (resource|path) ")


def rbac_denied(exc: BaseException) -> bool:
    """A 403 from the authorizer (RBAC), not from admission (a policy, Pod Security, quota)."""
    return isinstance(exc, ApiException) and exc.status == 403 and (
        bool(_RBAC_DENIAL.search(status_message(exc))) or not status_message(exc))


def api_error(exc: BaseException, doing: str) -> EnvironmentProblem:
    """One clear environment error for a failed API call: its own code and what we were doing.

    401 -> ERROR-AUTH (the credentials were rejected); 403 from RBAC ('... cannot VERB RESOURCE') -> ERROR-RBAC;
    403 from admission (Pod Security, quota) and every other HTTP error -> ERROR-API with the server's message;
    transport errors -> ERROR-API naming them (unreachable, refused, timed out, dropped, TLS)."""
    if isinstance(exc, EnvironmentProblem):
        return exc
    if isinstance(exc, ApiException) and exc.status:
        msg = status_message(exc)
        if exc.status == 401:
            return EnvironmentProblem("ERROR-AUTH", f"{doing}: the API server rejected the credentials (401 "
                                      f"Unauthorized): the token expired or the kubeconfig user is wrong. {msg}".strip())
        if exc.status == 403:
            if rbac_denied(exc):
                return EnvironmentProblem("ERROR-RBAC", f"{doing}: forbidden (403): {msg or exc.reason or ''}".strip())
            return EnvironmentProblem("ERROR-API", f"{doing}: refused by admission (403): {msg}")
        return EnvironmentProblem("ERROR-API", f"{doing}: HTTP {exc.status} {exc.reason or ''} {msg}".strip())
    if isinstance(exc, ApiException):  # status 0: the REST layer's own errors (TLS, bad request shape)
        reason = str(exc.reason or "")
        if "SSL" in reason:
            return EnvironmentProblem("ERROR-API", f"{doing}: TLS handshake with the API server failed (wrong CA or "
                                      f"server name in the kubeconfig?): {reason.splitlines()[-1][:200]}")
        return EnvironmentProblem("ERROR-API", f"{doing}: {reason[:300]}")
    return EnvironmentProblem("ERROR-API", f"{doing}: {_transport(exc)} ({type(_cause(exc)).__name__}: "
                              f"{str(_cause(exc))[:200]})")


@contextmanager
def calling(doing: str) -> Iterator[None]:
    """`with calling("listing nodes"): ...`: any failure of the API call(s) inside is raised as `api_error`'s
    named EnvironmentProblem (from None: the client's traceback adds nothing for the reader)."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - every failure of an API call is named, none is swallowed
        raise api_error(e, doing) from None
