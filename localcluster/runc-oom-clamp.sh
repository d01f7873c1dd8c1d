#!/bin/sh
# runc wrapper for hosts that deny lowering oom_score_adj (no CAP_SYS_RESOURCE, as in this CI sandbox).
# The kubelet gives Guaranteed and system-node-critical pods negative OOM scores (-997/-998); runc's nsexec
# then fails with "failed to update /proc/self/oom_score_adj: Permission denied" and the pod never starts.
# This clamps negative oomScoreAdj in the bundle's config.json to 0 (the lowest the host allows) before runc
# creates the container. Everything else passes through unchanged. See localcluster/README.md.
prev=""
for a in "$@"; do
  if [ "$prev" = "--bundle" ] || [ "$prev" = "-b" ]; then
    [ -f "$a/config.json" ] && sed -i -E 's/"oomScoreAdj":-[0-9]+/"oomScoreAdj":0/' "$a/config.json"
  fi
  prev="$a"
done
exec runc "$@"
