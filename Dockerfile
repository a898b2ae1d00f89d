# exposure-filter on Debian 12, built with the project's own scripts.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh
COPY . .
RUN BUILD_TYPE=Release scripts/build.sh -DEF_BUILD_TESTS=OFF -DEF_BUILD_BENCH=OFF

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      librdkafka1 libhiredis0.14 libyaml-cpp0.7 libspdlog1.10 libfmt9 libsimdjson14 \
      libprometheus-cpp-core1.0 libcpp-httplib0.11 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/exposure-filter /usr/local/bin/exposure-filter
COPY config/exposure-filter.yaml /etc/exposure-filter/exposure-filter.yaml
USER nobody
ENTRYPOINT ["exposure-filter"]
CMD ["run", "-c", "/etc/exposure-filter/exposure-filter.yaml"]
