# sluice-server for people with Docker:  docker build -f images/server.Dockerfile -t sluice-server:0.1.0 .
# Same files as `images/build server` (both run images/rootfs): the binary, sluice-load (the
# operator's calibration runs it from the tenant's image), libchdb.so, the
# libraries ldd lists (glibc, libstdc++, Debian's RocksDB 7.8 and its compressors), CA
# certificates, /tmp, user sluice (65532). No shell, no package manager.
ARG RUST_IMAGE=rust:1-bookworm

FROM ${RUST_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      npm libclang-dev clang librocksdb-dev pkg-config libssl-dev curl ca-certificates binutils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ENV CARGO_TARGET_DIR=/src/target SLUICE_CACHE=/cache SLUICE_SETUP_PROMTOOL=0
# scripts/setup fetches libchdb.so from npm (checksum-verified) and links it at .deps/chdb.
RUN ./scripts/setup \
 && cargo build --release --locked -p sluice-server --bin sluice-server \
 && cargo build --release --locked -p sluice-load --bin sluice-load \
 && images/rootfs server target/release/sluice-server /rootfs "$(readlink -f .deps/chdb/libchdb.so)" \
      target/release/sluice-load

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
COPY --from=build /rootfs/ /
USER 65532:65532
WORKDIR /var/lib/sluice
EXPOSE 8086
LABEL org.opencontainers.image.title="sluice-server" \
      org.opencontainers.image.description="Durable InfluxDB-compatible ingest into embedded chDB" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sluice-dev/sluice"
ENTRYPOINT ["/usr/local/bin/sluice-server"]
CMD ["--listen", "0.0.0.0:8086", "--data-dir", "/var/lib/sluice"]
