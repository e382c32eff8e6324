#!/usr/bin/env bash
# Install, upgrade or uninstall fedplace in stages, so that no admission fails
# while it happens (docs/operations.md, "Deploy", "Upgrade", "Uninstall").
#
# The MutatingWebhookConfiguration has failurePolicy Fail: registered before
# the webhook pods can answer, it makes every ReplicaSet, Deployment, pod…
# change outside the exempt namespaces fail. So:
#
#   install / upgrade (the same command):
#     1. apply everything but the webhook configuration
#        (kubectl apply -k OVERLAY -l 'fedplace.io/install-stage!=webhook');
#     2. wait for both Deployments to finish rolling out (one `rollout status`
#        per command: kubectl < 1.27 takes one resource only); with
#        cert-manager, wait for the webhook's certificate to be Ready first;
#     3. apply the webhook configuration (-l fedplace.io/install-stage=webhook),
#        with its caBundle already set: from the overlay (self-signed) or, for
#        cert-manager, from the CA of the issued certificate — so the API
#        server never calls the webhook without being able to verify it.
#   uninstall (--uninstall):
#     1. delete the webhook configuration first;
#     2. then everything else (kubectl delete -k OVERLAY). This deletes the
#        policy namespace with its ConfigMaps and, with components/cluster-crd,
#        the Cluster CRD with every Cluster: save what you want to keep first
#        (docs/operations.md, "Uninstall").
#
# Usage: deploy/scripts/install.sh [--overlay DIR] [--timeout 300s] [--uninstall]
# KUBECTL (default kubectl) names the kubectl binary; any version >= 1.24.
set -euo pipefail

OVERLAY="$(cd "$(dirname "$0")/.." && pwd)/overlays/cert-manager"
TIMEOUT=300s
UNINSTALL=0
KUBECTL="${KUBECTL:-kubectl}"
NS=opa
WEBHOOK=fedplace-admission
STAGE_LABEL=fedplace.io/install-stage

usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --overlay) OVERLAY="$2"; shift 2 ;;
    --overlay=*) OVERLAY="${1#*=}"; shift ;;
    --timeout) TIMEOUT="$2"; shift 2 ;;
    --timeout=*) TIMEOUT="${1#*=}"; shift ;;
    --uninstall) UNINSTALL=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "install.sh: unknown argument $1" >&2; usage 2 ;;
  esac
done
[ -d "$OVERLAY" ] || { echo "install.sh: no overlay directory $OVERLAY" >&2; exit 2; }

say() { echo "install.sh: $*" >&2; }

if [ "$UNINSTALL" = 1 ]; then
  say "1/2 deleting the webhook configuration first"
  "$KUBECTL" delete mutatingwebhookconfiguration "$WEBHOOK" --ignore-not-found
  say "2/2 deleting everything else"
  "$KUBECTL" delete -k "$OVERLAY" --ignore-not-found
  exit 0
fi

say "1/3 applying everything but the webhook configuration ($OVERLAY)"
"$KUBECTL" apply -k "$OVERLAY" -l "$STAGE_LABEL!=webhook"

say "2/3 waiting for the rollouts (timeout $TIMEOUT each)"
CA=""
if "$KUBECTL" -n "$NS" get certificate "$WEBHOOK-tls" >/dev/null 2>&1; then
  # cert-manager: the webhook's pods cannot start before their certificate exists.
  "$KUBECTL" -n "$NS" wait --for=condition=Ready "certificate/$WEBHOOK-tls" --timeout="$TIMEOUT"
  CA="$("$KUBECTL" -n "$NS" get secret "$WEBHOOK-tls" -o 'jsonpath={.data.ca\.crt}')"
  [ -n "$CA" ] || { say "secret $NS/$WEBHOOK-tls has no ca.crt"; exit 1; }
fi
"$KUBECTL" -n "$NS" rollout status deployment/opa --timeout="$TIMEOUT"
"$KUBECTL" -n "$NS" rollout status deployment/fedplace-admission --timeout="$TIMEOUT"

say "3/3 registering the webhook"
if [ -n "$CA" ]; then
  # Set the caBundle before the object reaches the API server (cert-manager's injector
  # keeps it current afterwards).
  "$KUBECTL" apply -k "$OVERLAY" -l "$STAGE_LABEL=webhook" --dry-run=client -o json \
    | "$KUBECTL" patch --local -f - --type=json -o json \
        -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$CA\"}]" \
    | "$KUBECTL" apply -f -
else
  "$KUBECTL" apply -k "$OVERLAY" -l "$STAGE_LABEL=webhook"
fi
say "done: check with docs/operations.md, \"Check\""
