"""The pre-flight proof that the admission policy cages the run's credentials (preflight.policy_in_force): a
server-side dry run of a namespace that is not a run's, which the policy must refuse, read from the answer."""

from types import SimpleNamespace

from kubernetes.client import ApiException

from gpuconform.pytest_plugin import preflight
from gpuconform import auditpage

DENIED = ('{"kind":"Status","message":"namespaces \\"gpuconform-policy-check\\" is forbidden: ValidatingAdmissionPolicy '
          '\'gpuconform-writes\' with binding \'gpuconform-writes\' denied request: gpuconform may write only its run '
          'namespaces ...","reason":"Forbidden","code":403}')


class Core:
    def __init__(self, error: Exception | None):
        self.error, self.sent = error, []

    def create_namespace(self, body, dry_run=None, _request_timeout=None):
        self.sent.append((body, dry_run))
        if self.error:
            raise self.error
        return body


def cluster(error=None):
    return SimpleNamespace(core=Core(error), request_timeout=5, source="kubeconfig admin@bed")


def forbidden(body: str) -> ApiException:
    e = ApiException(status=403, reason="Forbidden")
    e.body = body
    return e


def test_a_refusal_by_the_policy_proves_it_is_in_force_and_nothing_is_stored():
    c = cluster(forbidden(DENIED))
    assert preflight.policy_in_force(c).startswith("in force: gpuconform-writes refused")
    [(body, dry_run)] = c.core.sent
    assert dry_run == "All" and body["metadata"]["name"] == "gpuconform-policy-check"


def test_an_admitted_dry_run_says_not_in_force_and_the_report_warns():
    said = preflight.policy_in_force(cluster())
    assert said.startswith("not in force for kubeconfig admin@bed")
    assert any("gpuconform-writes is not in force" in w for w in auditpage.warnings({"environment": {
        "admission policy": said}}))


def test_a_refusal_by_rbac_or_another_answer_is_not_checked():
    assert preflight.policy_in_force(cluster(forbidden("namespaces is forbidden: User cannot create"))).startswith(
        "not checked: creating a namespace is refused by RBAC")
    assert preflight.policy_in_force(cluster(ApiException(status=500, reason="boom"))).startswith(
        "not checked: the dry run answered 500")
    assert auditpage.warnings({"environment": {"admission policy": "in force: ..."}}) == []
