# exposure-filter on Debian 12, built with the project's own scripts.
#   docker build -t exposure-filter:0.1.0 .  (the project version; or: docker compose build)
#   docker run --rm exposure-filter --help
# Two stages: the build stage has the compiler and the -dev packages
# (scripts/install-deps.sh --build); the runtime image only the shared libraries
# the binary loads (scripts/install-deps.sh --runtime, checked against the built
# binary in ctest: tests/integration/stack_files_test.cc). It runs as an
# unprivileged user and writes nothing: `docker run --read-only` works.

FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh --build && rm -rf /var/lib/apt/lists/*
COPY . .
# The commit, for --version and exposure_filter_build_info (.git is not copied):
#   docker build --build-arg EF_REVISION=$(git rev-parse --short=12 HEAD) .
ARG EF_REVISION=unknown
RUN BUILD_TYPE=Release BUILD_DIR=/build scripts/build.sh --binary -DEF_BUILD_TESTS=OFF -DEF_BUILD_BENCH=OFF \
    -DEF_REVISION=${EF_REVISION} \
    && strip -o /exposure-filter /build/exposure-filter

FROM debian:12-slim AS runtime
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh \
    && useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
         --shell /usr/sbin/nologin exposure-filter
COPY --from=build /exposure-filter /usr/local/bin/exposure-filter
COPY config/exposure-filter.yaml /etc/exposure-filter/exposure-filter.yaml
# Fails the image build if a shared library is missing.
RUN exposure-filter --version
USER exposure-filter:exposure-filter
# metrics.listen and serve.listen (set them to 0.0.0.0:<port> in a container).
EXPOSE 9464 8090
ENTRYPOINT ["exposure-filter"]
CMD ["run", "-c", "/etc/exposure-filter/exposure-filter.yaml"]
