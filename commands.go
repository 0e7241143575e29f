package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"chargeonce/db"
	"chargeonce/payment"
)

// runCommand runs an operator command instead of the server.
func runCommand(ctx context.Context, cfg config, args []string, stdout io.Writer, log *slog.Logger) error {
	switch {
	case len(args) == 3 && args[0] == "apikey" && args[1] == "create":
		pool, closeDB, err := openDatabase(ctx, cfg, log)
		if err != nil {
			return err
		}
		defer closeDB()
		m, key, err := payment.NewMerchants(pool, false).CreateAPIKey(ctx, args[2])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "API key for merchant %s (shown once; only its hash is stored):\n%s\n", m.Name, key)
		return nil
	case len(args) >= 2 && len(args) <= 3 && args[0] == "localdb" && args[1] == "stop":
		dir := filepath.Join(cfg.DataDir, "postgres")
		if len(args) == 3 {
			dir = args[2]
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		return db.StopLocal(ctx, abs)
	default:
		return errUsage
	}
}
