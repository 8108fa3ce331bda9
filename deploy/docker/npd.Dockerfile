# syntax=docker/dockerfile:1
# The image that deploy/kubernetes/node-problem-detector.yaml runs: the envdoctor image
# (Dockerfile beside this one, built first) with node-problem-detector's binary added, since
# NPD's own image has no Python for envdoctor to run on. Build from the repository root:
#   docker build -f deploy/docker/npd.Dockerfile \
#     --build-arg ENVDOCTOR_IMAGE=registry.example.com/tools/envdoctor:0.1.0 \
#     -t registry.example.com/tools/node-problem-detector-envdoctor:0.1.0 .
# NPD's binary is linked against glibc (its journald support loads libsystemd only when a
# journald monitor is configured; this one is a custom plugin only). Pin NPD_IMAGE to the NPD
# release your cluster runs.

ARG ENVDOCTOR_IMAGE=registry.example.com/tools/envdoctor:0.1.0
ARG NPD_IMAGE=registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.20

FROM ${NPD_IMAGE} AS npd

FROM ${ENVDOCTOR_IMAGE}
COPY --from=npd /node-problem-detector /node-problem-detector
USER 65534:65534
ENTRYPOINT ["/node-problem-detector"]
