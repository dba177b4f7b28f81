# Sourced by the scripts: where builds and caches live. A target directory outside the checkout
# lets a fresh clone (CI) reuse earlier builds; it is only a cache, a cold one works too.
SLUICE_CACHE="${SLUICE_CACHE:-$HOME/.cache/sluice}"
export SLUICE_CACHE
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SLUICE_CACHE/target}"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$HOME/go/bin:$PATH"
