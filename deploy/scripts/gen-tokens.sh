#!/usr/bin/env bash
# Generate the bearer tokens OPA accepts (see deploy/base/opa/authz.rego) into
# deploy/base/secrets/ (gitignored), from which kustomize generates the Secret
# opa/opa-tokens. Existing tokens are kept unless --force is given.
#
#   deploy/scripts/gen-tokens.sh [--force] [--out DIR]
#
# Each token is 32 random bytes, hex-encoded (64 characters; OPA's authz policy
# refuses tokens shorter than 32 characters).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(cd "$here/.." && pwd)/base/secrets"
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "gen-tokens.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

new_token() {
  if command -v openssl >/dev/null 2>&1; then
    openssl rand -hex 32
  else
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'
  fi
}

umask 077
mkdir -p "$out"
for name in sync-token admission-token notifications-token; do
  if [ -s "$out/$name" ] && [ "$force" -eq 0 ]; then
    echo "kept    $out/$name"
    continue
  fi
  # printf without a newline: the Secret value is exactly the token.
  printf '%s' "$(new_token)" > "$out/$name"
  echo "wrote   $out/$name"
done
