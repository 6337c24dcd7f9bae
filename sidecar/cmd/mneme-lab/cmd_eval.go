package main

import (
	"context"
	"log/slog"

	"github.com/mneme-memory/mneme/sidecar/eval/beam"
	"github.com/mneme-memory/mneme/sidecar/eval/feedback"
	"github.com/mneme-memory/mneme/sidecar/eval/lifecycle"
	"github.com/mneme-memory/mneme/sidecar/eval/locomo"
	"github.com/mneme-memory/mneme/sidecar/eval/qa"
	"github.com/mneme-memory/mneme/sidecar/eval/recall"
	revisioneval "github.com/mneme-memory/mneme/sidecar/eval/revision"
)

func cmdEvalLocomo(ctx context.Context, log *slog.Logger, args []string) error {
	return recall.Command(ctx, log, flags("eval locomo"), args, "../shared/data/locomo/locomo-dev.json",
		"LoCoMo JSON file (locomo10.json or a subset)", locomo.Load)
}

func cmdEvalBeam(ctx context.Context, log *slog.Logger, args []string) error {
	return recall.Command(ctx, log, flags("eval beam"), args, "../shared/data/beam/100K",
		"a BEAM conversation folder (chat.json, probing_questions.json) or a folder of them (a tier, e.g. 100K)", beam.Load)
}

func cmdEvalFeedback(ctx context.Context, log *slog.Logger, args []string) error {
	return feedback.Command(ctx, log, flags("eval feedback"), args)
}

func cmdEvalLifecycle(ctx context.Context, log *slog.Logger, args []string) error {
	return lifecycle.Command(ctx, log, flags("eval lifecycle"), args)
}

func cmdEvalRevision(ctx context.Context, log *slog.Logger, args []string) error {
	return revisioneval.Command(ctx, log, flags("eval revision"), args)
}

func cmdEvalQA(ctx context.Context, log *slog.Logger, args []string) error {
	return qa.Command(ctx, log, flags("eval qa"), args)
}
