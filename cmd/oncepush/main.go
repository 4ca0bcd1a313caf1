// Command oncepush delivers push notifications (FCM, APNs, Web Push, RuStore)
// at most once per device and never loses one. Run 'oncepush serve' for the
// HTTP API with its workers; 'oncepush help' lists the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/oncepush/oncepush/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
