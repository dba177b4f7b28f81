#!/usr/bin/env bash
# The operator as users run it: an image built from the binary, deployed with
# operator/deploy/ (RBAC, two replicas) into a running localkube, then checked end to end:
# in-cluster config, least-privilege RBAC, leader election between two pods, a reconcile, and a
# hand-over when the leader is deleted. It renames the manifests' namespace and cluster-scoped
# names (sluice-operator-e2e) so that it never touches a real installation, and deletes
# everything it created except the CRD (shared with the integration tests).
#
#   operator/e2e/in-cluster.sh      # a running localkube; root (or sudo) for image-from-dir
#
# SLUICE_NO_CARGO=1 packs the debug binary already built (scripts/test sets it after `cargo test
# --workspace`, whose build of the binary a `cargo build -p sluice-operator` would redo: one
# package alone resolves its dependencies' features otherwise, about 2 min on two cores).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$ROOT/scripts/env.sh"
LOCALKUBE="${LOCALKUBE:-$ROOT/../shared/cluster/localkube}"
export KUBECONFIG="${SLUICE_TEST_KUBECONFIG:-${LOCALKUBE_STATE:-/var/lib/localkube}/kubeconfig}"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
k() { "$LOCALKUBE" kubectl "$@"; }
log() { printf 'in-cluster: %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; k -n "$op" get pods -o wide >&2 || true; k -n "$op" logs -l "app.kubernetes.io/name=$op" --tail=30 --prefix >&2 || true; exit 1; }

ns="sluice-e2e-$$"
op=sluice-operator-e2e
work="$(mktemp -d)"
# operator/deploy/ with its own namespace and cluster-scoped names, and the test image.
render() {
  sed -e "s/sluice-system/$op/g" -e "s/\(ame: \)sluice-operator\$/\1$op/" \
    -e 's|image: sluice-operator:0.1.0|image: sluice-operator:e2e|' \
    "$ROOT/operator/deploy/rbac.yaml" <(echo ---) "$ROOT/operator/deploy/deployment.yaml"
}
cleanup() {
  k delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  render | k delete -f - --ignore-not-found --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

bin="$CARGO_TARGET_DIR/debug/sluice-operator"
if [ "${SLUICE_NO_CARGO:-0}" = 1 ]; then
  [ -x "$bin" ] || { log "SLUICE_NO_CARGO=1 but no $bin"; exit 1; }
else
  log "building the operator"
  cargo build --locked -q -p sluice-operator --bin sluice-operator
fi

log "packing the image sluice-operator:e2e"
root="$work/root"
install -D "$bin" "$root/usr/local/bin/sluice-operator"
objcopy --strip-debug "$root/usr/local/bin/sluice-operator"
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do install -D "$lib" "$root$lib"; done
mkdir -p "$root/etc/ssl/certs" "$root/tmp" && chmod 1777 "$root/tmp"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
as_root "$LOCALKUBE" image-from-dir "$root" sluice-operator:e2e --entrypoint '["/usr/local/bin/sluice-operator"]' --user 65532 >/dev/null

log "deploying"
k apply --server-side --force-conflicts --field-manager=sluice-e2e -f "$ROOT/crds/ingesttenant.yaml" >/dev/null
k wait --for=condition=Established crd/ingesttenants.sluice.dev --timeout=60s >/dev/null
# A previous run's namespace may still be terminating.
for _ in $(seq 60); do k get namespace "$op" >/dev/null 2>&1 || break; sleep 1; done
render | k apply -f - >/dev/null
k -n "$op" rollout status "deployment/$op" --timeout=180s >/dev/null || fail "the Deployment did not become ready"

holder() { k -n "$op" get lease sluice-operator -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
# Pods of the current rollout that are not terminating.
pods() {
  k -n "$op" get pods -l "app.kubernetes.io/name=$op" \
    -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' |
    awk 'NF == 1 { print $1 }' | tr '\n' ' '
}
for _ in $(seq 90); do
  h="$(holder)"
  set -- $(pods)
  [ "$#" = 2 ] && case " $* " in *" $h "*) [ -n "$h" ] && break;; esac
  sleep 1
done
leader="$(holder)"
case " $(pods) " in *" $leader "*) [ -n "$leader" ] || fail "no leader";; *) fail "the Lease holder '$leader' is not a current pod";; esac
log "leader: $leader"

log "reconciling a tenant"
k create namespace "$ns" >/dev/null
k -n "$ns" apply -f - >/dev/null <<EOF
apiVersion: sluice.dev/v1alpha1
kind: IngestTenant
metadata: {name: e2e}
spec: {replicas: 0}
EOF
k -n "$ns" wait --for=jsonpath='{.status.phase}'=Stopped ingesttenant/e2e --timeout=90s >/dev/null || fail "the tenant was not reconciled"
k -n "$ns" get statefulset e2e >/dev/null || fail "no StatefulSet"

log "deleting the leader pod: the standby must take over"
k -n "$op" delete pod "$leader" --wait=false >/dev/null
for _ in $(seq 60); do h="$(holder)"; [ -n "$h" ] && [ "$h" != "$leader" ] && break; sleep 1; done
new="$(holder)"
{ [ -n "$new" ] && [ "$new" != "$leader" ]; } || fail "no hand-over (holder '$new')"
log "new leader: $new"
k -n "$ns" patch ingesttenant e2e --type merge -p '{"spec":{"pool":{"flushWorkers":3}}}' >/dev/null
for _ in $(seq 60); do
  k -n "$ns" get configmap e2e-config -o jsonpath='{.data.sluice\.toml}' | grep -q 'flush_workers = 3' && break
  sleep 1
done
k -n "$ns" get configmap e2e-config -o jsonpath='{.data.sluice\.toml}' | grep -q 'flush_workers = 3' || fail "the new leader did not reconcile"
k -n "$ns" delete ingesttenant e2e --timeout=60s >/dev/null || fail "the finalizer did not run"
log "ok"
