# Small non-root image of the controller.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --locked --release -p memcached-controller

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/memcached-controller /memcached-controller
USER 65532:65532
ENTRYPOINT ["/memcached-controller"]
CMD ["run", "--leader-election"]
