"""Every fixed timing constant of the suite, in one place (as the Kubernetes e2e framework keeps its timeouts in
test/e2e/framework/timeouts.go).

What a user may reasonably tune is a config field instead (gpuconform/config.py, docs/config-reference.md):
`timeouts.podStart`, `timeouts.podComplete`, `timeouts.apiRequest`, `timeouts.cleanup`, the latency
`thresholds.*` and `baseline.latencyAbsolute`. The constants here are the suite's own mechanics: how often it
re-checks, how long a problem must persist, how a watch is renewed. Changing one changes what a verdict means
or how a run behaves under faults, so they are not configuration; change them here, with a reason, and run the
fault matrix (testing/e2e/test_fault_matrix.py).

All values are seconds unless the name says otherwise.
"""

from __future__ import annotations

# ---------------------------------------------------- pod waits (gpuconform/waits.py, gpuconform/pytest_plugin/podwait.py)

#: A problem seen on a Pending pod (unschedulable, image pull, container create error) must persist this long
#: before it is a verdict: the scheduler and the kubelet retry, and a transient condition must not fail a check.
PENDING_GRACE_S = 8.0

#: A scheduled pod whose containers are still not created after this long has its events read (the kubelet's
#: FailedCreatePodSandBox says why, e.g. no runtime handler for its RuntimeClass), then at most this often while it
#: stays so. Pods that start quickly cost no event reads.
SANDBOX_EVENTS_EVERY_S = 5.0

#: A wait (or the scheduler's wait for a running check) prints a live line after this much waiting, then again
#: every as long. Quick pods print nothing, so CI logs stay quiet.
PROGRESS_EVERY_S = 15.0

#: The longest a waiting thread blocks before it re-checks cancellation (Ctrl-C, SIGTERM, a stopped run):
#: pod waits, the scheduler's dispatch loop and pytest's wait for a check's job.
CANCEL_CHECK_S = 1.0

# ------------------------------------------------------------------ watches (gpuconform/watch.py)

#: A watch request's server-side timeout (`timeoutSeconds`); the watch is renewed from the last resourceVersion.
WATCH_WINDOW_S = 60

#: The client-side request timeout of a watch exceeds its server-side window by this much, so the server ends
#: the window normally and a silent connection is still detected.
WATCH_CLIENT_SLACK_S = 10

#: After a transient watch error (connection drop, 5xx) the watch re-watches from its last resourceVersion after
#: this pause.
WATCH_RETRY_S = 1.0

#: A watch that has failed without a single success for this long gives up: it keeps the last error in `failed`
#: and every reader raises it (an API server gone for two minutes is reported as such, not as a pod timeout).
WATCH_GIVE_UP_S = 120.0

# ------------------------------------------------------------------ API request retries (gpuconform/kube.py)

#: Attempts of one API request on transient errors (429, 5xx, connection errors; which requests may be repeated
#: is apierrors.should_retry's rule); auth and other permanent errors are never retried.
API_RETRY_ATTEMPTS = 5

#: Exponential backoff between attempts: this, twice this, four times this ... up to API_BACKOFF_MAX_S.
API_BACKOFF_BASE_S = 0.5

#: The longest pause between two attempts (without a Retry-After header).
API_BACKOFF_MAX_S = 8.0

#: A server's Retry-After header is honoured up to this long.
API_RETRY_AFTER_MAX_S = 30.0

#: One API call, all its attempts and the waits between them included, ends within this many times its request
#: timeout (`timeouts.apiRequest` unless the call sets its own); each attempt gets at most the time left.
API_CALL_DEADLINE_FACTOR = 2.0

#: The least request timeout one attempt is given when the call's deadline is nearly spent (also inside the
#: run's cleanup, so a namespace deletion is still sent when timeouts.cleanup is nearly spent; the namespace
#: controller finishes it server-side).
API_MIN_ATTEMPT_S = 1.0

#: Connecting to a kubelet's own port (gpuconform/kubeletroute.py): a node whose port the runner cannot reach costs
#: this (twice: two attempts) per kubelet path, at most once every KUBELET_RETRY_S; meanwhile its kubelet is read
#: through the node proxy where granted. Its read gets `timeouts.apiRequest`.
KUBELET_CONNECT_S = 3.0
#: A kubelet that could not be reached (refused, reset, timed out: restarting, a network blip) is tried on its port
#: again after this long; one that answered with an HTTP error or a certificate that did not verify is not, this run.
KUBELET_RETRY_S = 30.0

# ------------------------------------------------------------------ test pods (gpuconform/pods.py)

#: activeDeadlineSeconds of a test pod when its caller gives none: a SIGKILLed runner still frees the GPUs.
POD_ACTIVE_DEADLINE_S = 300
#: activeDeadlineSeconds of the run-long pod of the lost-access check (spans_run): the hard limit on a run's length
#: for that check; a dead runner's pod lets its device go after RUN_HOLD_STALE_S.
RUN_HOLD_DEADLINE_S = 3600
#: It re-runs its device check this often, so the last check is at most this old when the run ends, and the run's
#: end waits about half of it on average for a round that began after the node's other checks (a `sleep` that takes
#: no fraction sleeps 1 s instead).
RUN_HOLD_EVERY_S = 0.5
#: It exits, freeing its device, once the run's heartbeat on it (refreshed every HEARTBEAT_EVERY_S) has not changed
#: for this long: a SIGKILLed runner's pod lets its GPU go within about this time (plus the kubelet's sync period
#: for the last beat), not RUN_HOLD_DEADLINE_S. The kubelet rewrites the pod's downwardAPI file within its sync
#: period (1 min, jittered up to 1.5), so a live run's beats show at least every ~2 min: this leaves room for a
#: few missed beats.
RUN_HOLD_STALE_S = 240
#: Log lines read at the end of the run for its last rounds (a round prints about 25 lines).
RUN_HOLD_TAIL_LINES = 200

#: terminationGracePeriodSeconds of a test pod: the probes hold no state worth a graceful stop.
POD_TERMINATION_GRACE_S = 1

#: How long a probe pod that must hold its GPUs while others are created (the burst check) sleeps after its
#: evidence; the check deletes it when done, and activeDeadlineSeconds bounds it anyway.
POD_HOLD_S = 600

#: The end-of-run health read (test_no_gpu_goes_out_of_service_during_the_run): a node probe started with the check
#: repeats its report every HEALTH_ROUND_S, so the kubelet's allocatable list after the node's other checks is read
#: within a round or two instead of a new pod's start and end (about 3 s); it lasts up to RUN_HOLD_DEADLINE_S.
HEALTH_ROUND_S = 0.5

#: How long a new run namespace's RoleBinding (its pods' logs and events) may take to be honoured.
BINDING_WAIT_S = 10.0

#: How often a check reads a repeating probe's log while it waits for a new round.
ROUND_READ_EVERY_S = 0.2

#: The log lines a check reads of the repeating node probe: its rounds are four lines each.
PROBE_ROUND_TAIL_LINES = 16

# ------------------------------------------------------------------ probe logs (tests/allocation)

#: How long a check waits for a finished probe pod's log to become readable (the kubelet may serve it late).
LOG_READ_TIMEOUT_S = 30.0

#: How often it retries reading that log.
LOG_READ_EVERY_S = 0.5

# ---------------------------------------------- cleanup, heartbeat (gpuconform/pytest_plugin/namespaces.py, gpuconform/cleanup.py)

#: A run refreshes the heartbeat annotation on its namespaces this often (gpuconform.dev/heartbeat).
HEARTBEAT_EVERY_S = 30.0

#: `make cleanup` deletes a run's namespace only when its heartbeat is older than this (10 missed beats, so an
#: API hiccup or some clock skew between the run's machine and the cleanup's does not make a live run look dead).
HEARTBEAT_STALE_S = 300.0

# ---------------------------------------------- DRA claims (tests/allocation/test_workload.py shared claim)

#: A DRA driver's pool read incomplete (fewer slices of its newest generation than resourceSliceCount) is read
#: again this often, from the slice watch ...
POOL_READ_EVERY_S = 0.5

#: ... until it is complete or this long has passed: the resourceslice controller bumps the generation and then
#: writes a multi-slice pool one API call at a time (k8s.io/dynamic-resource-allocation v0.37.2 resourceslice/
#: resourceslicecontroller.go), so a healthy republish (NVIDIA's driver republishes on every health event) is
#: briefly seen incomplete; a pool still incomplete after this is a fault.
POOL_SETTLE_S = 10.0

#: A shared ResourceClaim's release after its pods ended is polled this often (one GET each).
CLAIM_POLL_S = 0.5

#: ... and judged after this long: the resourceclaim controller of kube-controller-manager removes ended pods from
#: status.reservedFor and clears status.allocation at once (kubernetes v1.37.2 pkg/controller/resourceclaim/
#: controller.go syncClaim), so 30 s is a controller that does not run, not a slow one.
CLAIM_RELEASE_S = 30.0
