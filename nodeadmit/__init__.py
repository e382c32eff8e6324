"""Node-level pod admission (KEP-2823): a plugin manager and an OPA-backed plugin.

``config`` (the KEP's configuration file, the directories, the
``PodAdmissionPlugin`` feature gate), ``result`` (AdmitResult and the
manager's own rejection reasons), ``plugins`` (calling shell / socket / grpc
plugins), ``manager`` (all plugins in parallel, each with a timeout, fail
closed), ``serve`` (the plugin side of the three transports), ``opa_plugin``
(``fedplace-node-admit``), ``rejection`` (the Failed pod status and the
Event), ``api`` (the gRPC service, generated stubs committed). The console
scripts: ``fedplace-node-admit-manager`` (``__main__``) and
``fedplace-node-admit``. docs/node-admission.md describes installing them on a node.
"""
