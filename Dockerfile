# Skua's images. One build stage (the workspace's production dependencies and the socket-option
# addon), then one image per program:
#
#   docker build -t skua/proxy:dev .                                  # the default target: proxy
#   docker build -t skua/controlplane:dev --target controlplane .
#   docker build -t skua/ztunnel:dev --target ztunnel .
#
# proxy is a drop-in for Istio's proxyv2: ENTRYPOINT /usr/local/bin/pilot-agent (= skua-proxy), so the
# injector's `proxy sidecar|router|waypoint ...` args and istio-init's `istio-iptables ...` args work
# unchanged; uid/gid 1337 (istio-proxy); working directory / so pilot-agent's relative paths
# (./etc/istio/proxy, ./var/run/secrets/tokens/istio-token, ./var/run/secrets/istio/root-cert.pem)
# resolve where the injector mounts them; iptables for istio-init. It is also Envoy's command line
# (/usr/local/bin/envoy -c bootstrap.yaml) and the waypoint (`proxy waypoint`).
#
# The base images are arguments: the public Node 24 images by default; containers/base/ makes
# stand-ins from Debian's debootstrap and npm where no registry can be reached.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG NODE_BUILD_IMAGE=node:24-bookworm

# --- build: pnpm install (production only) + the N-API addon (node-gyp: python3, make, g++) ---
FROM ${NODE_BUILD_IMAGE} AS build
WORKDIR /src
RUN npm install --global --no-fund --no-audit --loglevel=error pnpm@10.34.9
# Manifests first: the dependency layer is reused across source edits.
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/proxy/package.json packages/proxy/
COPY packages/ztunnel/package.json packages/ztunnel/
COPY packages/waypoint/package.json packages/waypoint/
COPY packages/controlplane/package.json packages/controlplane/
RUN pnpm install --frozen-lockfile --prod --config.confirmModulesPurge=false
COPY scripts/build-native.sh scripts/
COPY packages/proxy/native/binding.gyp packages/proxy/native/sockopt.c packages/proxy/native/splice.c packages/proxy/native/netns.c packages/proxy/native/
RUN scripts/build-native.sh \
 && mkdir -p /addon && cp packages/proxy/native/build/Release/sockopt.node packages/proxy/native/build/Release/splice.node packages/proxy/native/build/Release/netns.node /addon/
# Only what runs: sources and entry points, no tests.
COPY packages/proxy/bin packages/proxy/bin
COPY packages/proxy/src packages/proxy/src
COPY packages/ztunnel/bin packages/ztunnel/bin
COPY packages/ztunnel/src packages/ztunnel/src
COPY packages/controlplane/bin packages/controlplane/bin
COPY packages/controlplane/src packages/controlplane/src
RUN rm -rf packages/proxy/native/build && mkdir -p packages/proxy/native/build/Release \
 && mv /addon/*.node packages/proxy/native/build/Release/ \
 && rm -f packages/proxy/native/*.c packages/proxy/native/binding.gyp scripts/build-native.sh

# --- what every image shares ---
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /

# --- plus iptables and iproute2 (proxyv2 has both; the CNI stand-in in the ztunnel image applies
# ambient's in-pod rules and routes with them) ---
FROM runtime AS runtime-net
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables iproute2 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log

# --- skua-controlplane: xDS (15010), CA (15012), WDS; runs as 1337 like istiod ---
FROM runtime AS controlplane
COPY --from=build /src/package.json /src/pnpm-workspace.yaml /app/
COPY --from=build /src/node_modules /app/node_modules
COPY --from=build /src/packages/proxy /app/packages/proxy
COPY --from=build /src/packages/controlplane /app/packages/controlplane
RUN ln -s /app/packages/controlplane/bin/skua-controlplane.js /usr/local/bin/skua-controlplane \
 && groupadd --gid 1337 istio-proxy && useradd --uid 1337 --gid 1337 --no-create-home --home-dir /var/lib/istio istio-proxy \
 && mkdir -p /var/lib/istio/ca /etc/istio/config && chown -R 1337:1337 /var/lib/istio
USER 1337:1337
EXPOSE 15010 15012
ENTRYPOINT ["/usr/local/bin/skua-controlplane"]

# --- skua-ztunnel: Istio's ztunnel image (per node; in-pod mode needs the CNI's ZDS socket and
# NET_ADMIN/SYS_ADMIN to enter pod network namespaces, as istio/ztunnel runs). Ports: 15001/15006/15008
# inside each pod, 15020 metrics, 15021 readiness, 15000 admin, 15053 DNS. The same image runs the CNI
# stand-in (`cni-standin`, the node agent: iptables, iproute2, nsenter) and its per-pod `cni-plugin`.
FROM runtime-net AS ztunnel
COPY --from=build /src/package.json /src/pnpm-workspace.yaml /app/
COPY --from=build /src/node_modules /app/node_modules
COPY --from=build /src/packages/proxy /app/packages/proxy
COPY --from=build /src/packages/ztunnel /app/packages/ztunnel
RUN ln -s /app/packages/ztunnel/bin/skua-ztunnel.js /usr/local/bin/ztunnel \
 && ln -s /app/packages/ztunnel/bin/skua-ztunnel.js /usr/local/bin/skua-ztunnel
# Node's compile cache, filled at build time under the V8 flags skua-ztunnel runs with (they are part
# of the cache's key; bin/v8-flags.js): a pod starts from an empty /tmp, and a start without it loads
# type stripping's compiler, ~20 MB more anonymous memory for the life of the ztunnel. Node keys the
# cache by uid: built as root, as the ztunnel runs; read-only at run time is fine.
ENV NODE_COMPILE_CACHE=/var/lib/skua/compile-cache
RUN mkdir -p /var/lib/skua/compile-cache && node /app/packages/ztunnel/bin/warm-compile-cache.js
EXPOSE 15000 15020 15021
ENTRYPOINT ["/usr/local/bin/ztunnel"]

# --- skua-proxy as Istio's proxyv2 (the default target) ---
FROM runtime-net AS proxy
COPY --from=build /src/package.json /src/pnpm-workspace.yaml /app/
COPY --from=build /src/node_modules /app/node_modules
COPY --from=build /src/packages/proxy /app/packages/proxy
RUN for name in pilot-agent skua-proxy envoy; do ln -s /app/packages/proxy/bin/skua-proxy.js "/usr/local/bin/$name"; done \
 && groupadd --gid 1337 istio-proxy && useradd --uid 1337 --gid 1337 --create-home istio-proxy \
 && mkdir -p /etc/istio/proxy /etc/istio/pod /var/lib/istio/data /var/run/secrets/istio /var/run/secrets/tokens /var/lib/skua/compile-cache \
 && chown -R 1337:1337 /etc/istio/proxy /var/lib/istio /var/lib/skua
USER 1337:1337
# Node's compile cache, filled at build time (under the V8 flags bin/v8-flags.js starts the proxy with:
# they are part of the cache's key): a pod starts from an empty /tmp, and a start without it
# loads type stripping's compiler, ~20 MB more anonymous memory for the life of every sidecar (issue 13).
# Node keys the cache by uid, hence built as 1337; read-only at run time is fine (readOnlyRootFilesystem).
ENV NODE_COMPILE_CACHE=/var/lib/skua/compile-cache
RUN node /app/packages/proxy/bin/warm-compile-cache.js
# V8's young generation capped at 2 x 4 MB: a sidecar's start-up (xDS, protos) grows it to V8's 2 x 16 MB
# default and it never shrinks back, 25-40 MB of RSS per pod that a proxy at 1,000 req/s does not need
# (issue 13; bench/tools/pair-profile.ts). bin/skua-proxy.js also bounds the old generation's growth.
# ./dev bench reads this line, so the benchmarks run with what ships.
ENV NODE_OPTIONS=--max-semi-space-size=4
# admin 15000, outbound 15001, inbound 15006, HBONE 15008, agent status 15020, readiness 15021,
# DNS 15053, Prometheus 15090.
EXPOSE 15000 15001 15006 15008 15020 15021 15053 15090
ENTRYPOINT ["/usr/local/bin/pilot-agent"]

