"""fedplace: policy-driven placement for federated Kubernetes, decided by Open Policy Agent.

One installed package; its parts live in the repository's top-level folders
(pyproject.toml's ``package-dir`` maps them here):

=====================  ==========  ==============================================
package                folder      job
=====================  ==========  ==============================================
fedplace.admission     admission/  ``fedplace-admission``, the mutating webhook
fedplace.sync          sync/       ``opa-kube-sync``, OPA's sidecar
fedplace.remediator    remediator/ re-deciding admitted objects (in opa-kube-sync)
fedplace.insight       insight/    ``fedplace`` (explain, what-if, report, limits)
fedplace.nodeadmit     nodeadmit/  node-level pod admission (KEP-2823)
fedplace.common        common/     what they share: OPA and API server clients, …
=====================  ==========  ==============================================
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fedplace")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
