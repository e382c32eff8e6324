"""Building blocks shared by admission, sync and the remediator.

``opa_client`` (OPA REST client with typed errors), ``retry`` (tenacity
policies), ``kube_client`` (API client construction, raw JSON calls, resource
paths), ``informer`` (list/watch with relist on 410), ``logs`` (JSON logs),
``ops_http`` (/healthz, /readyz, /metrics), ``annotations`` (canonical
annotation values and the JSON patch that merges them).
"""
