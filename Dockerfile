# syntax=docker/dockerfile:1
#
# The rollboot container image: the release binary of scripts/release, checked
# against its SHA256SUMS, on Debian slim (for nsenter, from util-linux, which the
# docker job's reboot command runs). Build the release first, then the image
# with BuildKit (docker buildx, podman or buildah set TARGETARCH):
#
#   scripts/release linux/amd64 linux/arm64
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v1.2.3 -t <registry>/rollboot:v1.2.3 .
#
# It runs as an unprivileged user by default: enough for the CLI (status,
# request, ...) and the coordinator. The agent of deploy/nomad/rollboot-docker.nomad.hcl
# reboots the host and so runs as root in a privileged container: that job sets
# user = "root" (docs/install.md).

ARG BASE_IMAGE=debian:12-slim

FROM ${BASE_IMAGE} AS unpack
ARG VERSION=dev
ARG TARGETARCH
WORKDIR /dist
COPY dist/SHA256SUMS dist/rollboot_${VERSION}_linux_${TARGETARCH}.tar.gz ./
RUN grep " rollboot_${VERSION}_linux_${TARGETARCH}.tar.gz\$" SHA256SUMS | sha256sum -c - \
 && tar -xzf "rollboot_${VERSION}_linux_${TARGETARCH}.tar.gz" rollboot LICENSE

FROM ${BASE_IMAGE}
ARG VERSION=dev
LABEL org.opencontainers.image.title="rollboot" \
      org.opencontainers.image.description="Safe, automatic, rolling reboots for HashiCorp Nomad clusters" \
      org.opencontainers.image.source="https://github.com/rollboot/rollboot" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=unpack /dist/rollboot /usr/local/bin/rollboot
COPY --from=unpack /dist/LICENSE /usr/share/doc/rollboot/LICENSE
# 65532: the conventional "nonroot" user of minimal images; no home, no shell login.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/rollboot"]
CMD ["--help"]
