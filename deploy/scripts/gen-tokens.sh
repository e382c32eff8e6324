#!/usr/bin/env bash
# Generate the bearer tokens OPA accepts (see deploy/base/opa/authz.rego) into
# deploy/base/secrets/ (gitignored), from which kustomize generates the Secret
# opa/opa-tokens. Existing tokens are kept unless asked otherwise.
#
#   deploy/scripts/gen-tokens.sh [--out DIR] [--force | --stage | --promote | --retire]
#
# Each token is 32 random bytes, hex-encoded (64 characters; OPA's authz policy
# refuses tokens shorter than 32 characters).
#
# reader-token is for people and CI reading OPA (fedplace explain / what-if /
# report; docs/operations.md, "Reaching OPA from a laptop or CI"): read and ask,
# never write.
#
# Rotating the OPA tokens (sync-token, admission-token, reader-token) without a 401 window,
# applying (`kubectl apply -k …`) after each step and waiting for the rollout:
#   --stage    new tokens into <name>-alt: OPA accepts them, clients still
#              send the current ones;
#   --promote  swap <name> and <name>-alt: clients send the new tokens, OPA
#              accepts both, so every old/new pod pair still agrees;
#   --retire   empty <name>-alt: OPA accepts only the new tokens.
# --force replaces every token in one step (pods of different generations
# refuse each other until the rollout ends). notifications-token has no
# alternate: --force rotates it, and its callers must follow.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(cd "$here/.." && pwd)/base/secrets"
mode=keep
while [ $# -gt 0 ]; do
  case "$1" in
    --force) mode=force ;;
    --stage) mode=stage ;;
    --promote) mode=promote ;;
    --retire) mode=retire ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
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

# printf without a newline: the Secret value is exactly the token.
write() { printf '%s' "$2" > "$out/$1"; echo "wrote   $out/$1"; }

umask 077
mkdir -p "$out"
for name in sync-token admission-token reader-token; do  # check everything before writing anything
  alt="$out/$name-alt"
  if [ "$mode" = stage ] && [ -s "$alt" ]; then
    echo "gen-tokens.sh: $name-alt is not empty: a rotation is under way (--promote or --retire it first)" >&2
    exit 1
  fi
  if [ "$mode" = promote ] && { [ ! -s "$alt" ] || [ ! -s "$out/$name" ]; }; then
    echo "gen-tokens.sh: $name-alt is empty: nothing staged (--stage first)" >&2
    exit 1
  fi
done

for name in sync-token admission-token reader-token notifications-token; do
  if [ -s "$out/$name" ] && [ "$mode" != force ]; then
    echo "kept    $out/$name"
  else
    write "$name" "$(new_token)"
  fi
done

for name in sync-token admission-token reader-token; do
  alt="$name-alt"
  [ -e "$out/$alt" ] || write "$alt" ""  # no rotation under way: matches nothing
  case "$mode" in
    stage) write "$alt" "$(new_token)" ;;
    promote)
      current="$(cat "$out/$name")"
      write "$name" "$(cat "$out/$alt")"
      write "$alt" "$current" ;;
    retire|force) write "$alt" "" ;;
  esac
done
