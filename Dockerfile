# syntax=docker/dockerfile:1
# jq's container image: one static binary on an empty (scratch) base, run as a numeric non-root user
# (FR-049), well under NFR-018's 200 MB (about 38 MB). Every role runs from it:
#
#   docker build -t jq:dev --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) .
#   docker run jq:dev --role=server          # or JQ_ROLE=server; worker, producer, admin work the same way
#
# Stages:
#   build     compiles /rootfs/jq like `go tool -modfile=tools/go.mod task build:release` (static, -trimpath, -s -w),
#             the version and commit given as build args (the context has no .git to stamp them from),
#             next to the CA bundle and deploy/rootfs (the passwd/group entries of user 65532).
#   prebuilt  the same /rootfs taken from the build context instead, for machines that cannot pull the
#             golang image: `--build-arg ROOTFS=prebuilt` with a context holding rootfs/ laid out like
#             the build stage's (internal/deploytest builds the image this way).
#   runtime   (the last, default target) FROM scratch: the one definition of what ships.

ARG GO_IMAGE=golang:1.26-bookworm
# Which stage provides /rootfs: build (default) or prebuilt.
ARG ROOTFS=build

FROM ${GO_IMAGE} AS build
ARG VERSION=v0.1.0-dev
ARG COMMIT=unknown
WORKDIR /src
# Dependencies first: this layer stays cached until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath \
      -ldflags "-s -w \
        -X github.com/jq-dev/jq/internal/buildinfo.Version=${VERSION} \
        -X github.com/jq-dev/jq/internal/buildinfo.Commit=${COMMIT}" \
      -o /rootfs/jq . \
 && cp -R deploy/rootfs/. /rootfs/ \
 && mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && chmod 1777 /rootfs/tmp

FROM scratch AS prebuilt
COPY rootfs/ /rootfs/

FROM ${ROOTFS} AS rootfs

FROM scratch AS runtime
ARG VERSION=v0.1.0-dev
ARG COMMIT=unknown
COPY --from=rootfs /rootfs/ /
LABEL org.opencontainers.image.title="jq" \
      org.opencontainers.image.description="jq, a distributed job queue: server, worker, producer and operator CLI in one binary (--role / JQ_ROLE)" \
      org.opencontainers.image.source="https://github.com/jq-dev/jq" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
# API (gRPC/Connect), server metrics and health, web console, worker metrics and health, producer metrics.
EXPOSE 50051 9090 8080 8088 9091 8081 9092
ENV JQ_ROLE=server
# No shell in the image: the binary probes its own role's /readyz (roles/healthcheck).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/jq", "healthcheck"]
ENTRYPOINT ["/jq"]
