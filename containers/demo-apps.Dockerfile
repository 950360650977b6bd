# The demo's sample apps (demo/apps: Bookinfo-shaped productpage, details, reviews, ratings, httpbin),
# for compose.yaml and containers/kube/. Not part of Skua; built from the repository root:
#   docker build -f containers/demo-apps.Dockerfile -t skua/demo-apps:dev .
ARG NODE_IMAGE=node:24-bookworm-slim
FROM ${NODE_IMAGE}
COPY demo/apps /app/demo/apps
ENV LISTEN_ADDR=0.0.0.0 PORT=9080
# Not 1337: Istio's capture rules let that uid's traffic bypass the sidecar.
USER 1000:1000
EXPOSE 9080
ENTRYPOINT ["node", "/app/demo/apps/bookinfo.ts"]
