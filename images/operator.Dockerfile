# sluice-operator for people with Docker:  docker build -f images/operator.Dockerfile -t sluice-operator:0.1.0 .
# Same files as `images/build operator` (both run images/rootfs): the binary and the libraries
# ldd lists (glibc, OpenSSL), CA certificates, /tmp, user sluice (65532). No chDB, no shell.
ARG RUST_IMAGE=rust:1-bookworm

FROM ${RUST_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      pkg-config libssl-dev ca-certificates binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ENV CARGO_TARGET_DIR=/src/target
# The operator never links chDB or RocksDB; only the workspace manifest needs every member.
RUN cargo build --release --locked -p sluice-operator --bin sluice-operator \
 && images/rootfs operator target/release/sluice-operator /rootfs

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
COPY --from=build /rootfs/ /
USER 65532:65532
EXPOSE 8080
LABEL org.opencontainers.image.title="sluice-operator" \
      org.opencontainers.image.description="Kubernetes operator for sluice IngestTenants" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sluice-dev/sluice"
ENTRYPOINT ["/usr/local/bin/sluice-operator"]
