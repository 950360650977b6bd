#!/usr/bin/env bash
# Makes the stand-in for the public Node 24 base images where no registry can be reached:
# Debian bookworm from debootstrap (minbase) plus Node 24 from npm, laid out as the official
# node:24-bookworm-slim image is (/usr/local/bin/node, npm and npx, /usr/local/include/node).
#
#   make-standin.sh OUT_DIR NODE_PACKAGE_DIR NPM_TARBALL [CA_BUNDLE]
#
# CA_BUNDLE: the certificates this machine trusts (where TLS to npm goes through an intercepting
# proxy), installed as /etc/ssl/certs/ca-certificates.crt; standin.ts points NODE_EXTRA_CA_CERTS at it.
# Writes OUT_DIR/slim.tar (the root filesystem, for `podman import`). The build variant
# (node:24-bookworm's compilers) is made from it by containers/base/standin.ts with `podman run`.
# Needs root (debootstrap) and the Debian mirror; takes about a minute.
set -euo pipefail
out=$1 node_pkg=$2 npm_tgz=$3 ca_bundle=${4:-}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

root=$(mktemp -d "${out}/rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$out/debootstrap.log" 2>&1 \
  || { tail -20 "$out/debootstrap.log" >&2; echo "make-standin: debootstrap failed (log: $out/debootstrap.log)" >&2; exit 1; }

# Node and its headers (node-gyp builds addons against /usr/local/include/node, as in the official image).
install -m 0755 "$node_pkg/bin/node" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/include"
cp -a "$node_pkg/include/node" "$root/usr/local/include/node"
# npm (which bundles node-gyp), from its registry tarball.
mkdir -p "$root/usr/local/lib/node_modules/npm"
tar -xzf "$npm_tgz" -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
if [ -n "$ca_bundle" ]; then
  mkdir -p "$root/etc/ssl/certs"
  install -m 0644 "$ca_bundle" "$root/etc/ssl/certs/ca-certificates.crt"
fi
# The official image's unprivileged user.
chroot "$root" groupadd --gid 1000 node
chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
tar --numeric-owner -C "$root" -cf "$out/slim.tar.tmp" .
mv "$out/slim.tar.tmp" "$out/slim.tar"
