#!/usr/bin/env bash
# The container recipe's build steps (deploy/Containerfile runs this in its
# build stage), runnable without a container runtime: builds `weir` and lays
# out the image's files under OUT_DIR. `.ci/container-build` runs it on a copy
# of the tree without `.git`.
#   deploy/build.sh OUT_DIR
# WEIR_BUILD_PROFILE (default `release`) picks the cargo profile.
set -euo pipefail
out=${1:?usage: deploy/build.sh OUT_DIR}
profile=${WEIR_BUILD_PROFILE:-release}
cd "$(dirname "$0")/.."
mkdir -p "$out"
out=$(cd "$out" && pwd)

cargo build --locked --profile "$profile" -p weir-host --bin weir
case $profile in dev) folder=debug ;; *) folder=$profile ;; esac
bin=${CARGO_TARGET_DIR:-target}/$folder/weir

install -D -m 0755 "$bin" "$out/usr/local/bin/weir"
"$bin" man --out "$out/usr/local/share/man/man1"
install -d "$out/usr/share/bash-completion/completions"
"$bin" completions bash > "$out/usr/share/bash-completion/completions/weir"
install -D -m 0644 deploy/weir.toml "$out/etc/weir/weir.toml"
# The image's own config must load as `weir serve` would load it.
WEIR_DATA_DIR=/var/lib/weir "$bin" config check "$out/etc/weir/weir.toml"
# The ledger's volume and the component cache: owned by the runtime user in
# the image (the Containerfile copies them with --chown).
install -d -m 0700 "$out/var/lib/weir" "$out/var/cache/weir"
"$bin" --version
