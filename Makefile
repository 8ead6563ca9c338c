# anechat: `make run` starts the app, `make test` runs every test.
# The foundation issue grows these targets (frontend, e2e, smoke, darwin vet).

.PHONY: test go-test vet

test: vet go-test

go-test:
	go test ./...

vet:
	go vet ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 go vet ./engine/... ./storage/...
