package app

import (
	"runtime"
	"testing"

	"anechat/cli"
)

func TestSystemInfoReportsThisBinary(t *testing.T) {
	got := New(Options{}).System.Info()
	want := SystemInfo{Version: cli.Version, OS: runtime.GOOS, Arch: runtime.GOARCH, Go: runtime.Version()}
	if got != want {
		t.Fatalf("Info() = %+v, want %+v", got, want)
	}
}
