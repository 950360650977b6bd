#!/usr/bin/env bash
# Builds the Go peers the tests run against, pinned, into .tools/bin (once; later runs only check):
#   h2spec                 HTTP/2 conformance (github.com/summerwind/h2spec)
#   grpc-interop-client    grpc-go's standard interop test client
#   grpc-interop-server    grpc-go's standard interop test server
#   compose-go             the Compose Specification's loader (what `docker compose` parses files with)
# Without Go on the machine it prints why and exits 0: the tests that need these then skip.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="$PWD/.tools/bin"
TOOLS=(
  "h2spec github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible h2spec"
  "client google.golang.org/grpc/interop/client@v1.85.0 grpc-interop-client"
  "server google.golang.org/grpc/interop/server@v1.85.0 grpc-interop-server"
  "cmd github.com/compose-spec/compose-go/v2/cmd@v2.16.2 compose-go"
)

up_to_date() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/$1.version" 2>/dev/null)" = "$2" ]; }

missing=0
for t in "${TOOLS[@]}"; do read -r _ pkg out <<<"$t"; up_to_date "$out" "$pkg" || missing=1; done
[ $missing -eq 0 ] && exit 0

if ! command -v go >/dev/null 2>&1; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "dev: Go is not installed: h2spec, the gRPC interop suite and the compose-go check will be skipped" >&2
  exit 0
fi

mkdir -p "$BIN"
# Test files may ask for the tools at the same time: one build at a time.
exec 9>"$PWD/.tools/.lock"
flock 9
for t in "${TOOLS[@]}"; do
  read -r name pkg out <<<"$t"
  up_to_date "$out" "$pkg" && continue
  echo "dev: go install $pkg"
  tmp=$(mktemp -d)
  GOBIN="$tmp" GOFLAGS=-mod=mod go install "$pkg"
  mv "$tmp/$name" "$BIN/$out"
  echo "$pkg" > "$BIN/$out.version"
  rm -rf "$tmp"
done
