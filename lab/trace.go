package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"chargeonce/internal/foreground"
	"chargeonce/internal/jaeger"
	"chargeonce/internal/proc"
)

// runTrace runs `trace`: Jaeger's all-in-one on loopback, and a chargeonce
// server (as make run serves it) exporting its traces to it, until Ctrl-C
// stops both.
func runTrace(ctx context.Context, args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("trace", flag.ContinueOnError)
	fset.SetOutput(io.Discard)
	binary := binaryFlag(fset)
	if err := fset.Parse(args); err != nil || fset.NArg() != 0 {
		return errUsage
	}
	server, err := serverBinary(*binary)
	if err != nil {
		return err
	}
	// Under make, a Ctrl-C is this process group's alone (foreground): the
	// server and Jaeger stop, and make reports how.
	defer foreground.Take()()
	bin, err := jaeger.Binary(ctx)
	if err != nil {
		return err
	}
	j, err := jaeger.Start(ctx, bin)
	if err != nil {
		return err
	}
	defer func() { _ = j.Stop(5 * time.Second) }()
	fmt.Fprintf(stdout, "Jaeger: its query API on %s (a trace: %s/api/traces/TRACE_ID; a service's: %s/api/traces?service=chargeonce&operation=payment.claim);\n"+
		"chargeonce exports to it over OTLP at %s. A charge's trace id is its answer's X-Trace-Id. Ctrl-C stops both.\n",
		j.Query, j.Query, j.Query, j.OTLP)
	root, err := proc.ModuleRoot()
	if err != nil {
		return err
	}
	s, err := proc.Start(server, proc.Options{Args: []string{"serve"}, Dir: root, Output: stdout,
		Env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": j.OTLP, "OTEL_BSP_SCHEDULE_DELAY": "500"}})
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return s.Stop(40 * time.Second)
	case <-s.Done():
		return fmt.Errorf("%s exited: %s", filepath.Base(server), s.State())
	}
}
