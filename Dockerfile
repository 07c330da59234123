# Build stage: a static kray-operator binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/kray-operator ./cmd/kray-operator

# Runtime stage: distroless, non-root, nothing but the binary.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/kray-operator /kray-operator
USER 65532:65532
ENTRYPOINT ["/kray-operator"]
