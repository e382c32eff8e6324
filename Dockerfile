# syntax=docker/dockerfile:1
# One image for both long-running components; the Deployment picks the command:
#   fedplace-admission   the mutating admission webhook
#   opa-kube-sync        OPA's sidecar (replication, policy loading, remediation)
#   fedplace             the CLI (explain, what-if, report, limits), OPA's library included
# The devstack (development-only stand-ins, its own distribution) is not included.
#
#   docker build -t REGISTRY/fedplace:TAG .
#
# Pin PYTHON_IMAGE by digest in your build pipeline for reproducible builds.
ARG PYTHON_IMAGE=python:3.11-slim

# -- builder: install the package and its dependencies into a virtualenv ------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CONSTRAINT=/src/constraints.txt \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/fedplace
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
# The package fedplace and the folders pyproject.toml's package-dir maps into it.
COPY fedplace/ fedplace/
COPY common/ common/
COPY admission/ admission/
COPY sync/ sync/
COPY remediator/ remediator/
COPY insight/ insight/
COPY nodeadmit/ nodeadmit/
# Not editable, no extras: only the runtime dependencies of pyproject.toml, at the versions
# constraints.txt pins (also in pip's isolated build environment). Then OPA's
# own library at fedplace's one pin (`fedplace what-if` evaluates with it; its metadata
# asks for Python >= 3.14 but it works on 3.11, hence the flags; it has no dependencies).
# Byte-code is compiled here, as the runtime root filesystem is read-only.
RUN /opt/fedplace/bin/pip install . \
 && /opt/fedplace/bin/pip install --ignore-requires-python --no-deps -r insight/opa-bindings.txt \
 && /opt/fedplace/bin/python -m compileall -q /opt/fedplace/lib \
 && /opt/fedplace/bin/fedplace-admission --help >/dev/null \
 && /opt/fedplace/bin/opa-kube-sync --help >/dev/null \
 && /opt/fedplace/bin/fedplace --help >/dev/null \
 && /opt/fedplace/bin/python -c "import opa_bindings"

# -- runtime: the virtualenv on a clean base, no build tools, not root ---------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="fedplace" \
      org.opencontainers.image.description="Policy-driven placement for federated Kubernetes: fedplace-admission and opa-kube-sync" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 65532 fedplace \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin fedplace
COPY --from=builder /opt/fedplace /opt/fedplace
ENV PATH=/opt/fedplace/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# 8443: fedplace-admission (HTTPS); 8182: opa-kube-sync (health, metrics, notifications).
EXPOSE 8443 8182
CMD ["fedplace-admission", "--help"]
