// Package embed owns mneme's text embedders: the built-in "hash" embedder
// (deterministic feature hashing, also implemented in SQL as
// mneme.hash_embed, so psql users get embeddings with no service) and the
// client of an external OpenAI-compatible embedding model.
package embed

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// DefaultDim is the embedding dimension of a database migrated without
// MNEME_EMBED_DIM.
const DefaultDim = 256

// ErrEmptyText is returned for empty or whitespace-only text: it has no
// features, and a zero vector has no cosine distance to anything.
var ErrEmptyText = errors.New("text is empty or whitespace only")

// Feature weights: a whole word counts twice as much as one of its
// character trigrams. Multiples of 0.5 sum exactly in float64, so Go and
// SQL add them up to identical values in any order.
const (
	wordWeight    = 1.0
	trigramWeight = 0.5
)

// Hash is the built-in embedder: signed feature hashing of folded word
// tokens and their character trigrams into Dim components, L2-normalised.
// It captures lexical and fuzzy (spelling, inflection) similarity, not
// meaning. mneme.hash_embed(text, dim) in SQL returns the same vector.
// (The field is not called Dim because every embedder has a Dim method.)
type Hash struct{ Dimensions int }

// NewHash returns the hash embedder for dim components.
func NewHash(dim int) Hash { return Hash{Dimensions: dim} }

// Dim returns the embedding dimension.
func (h Hash) Dim() int { return h.Dimensions }

// Embed embeds each text. An empty or whitespace-only text fails the call.
func (h Hash) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := h.EmbedOne(t)
		if err != nil {
			return nil, fmt.Errorf("hash embed text %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// EmbedOne embeds a single text.
func (h Hash) EmbedOne(text string) ([]float32, error) {
	if h.Dimensions < 2 {
		return nil, fmt.Errorf("hash embedder dimension %d: must be at least 2", h.Dimensions)
	}
	if !utf8.ValidString(text) {
		return nil, errors.New("text is not valid UTF-8")
	}
	if IsBlank(text) {
		return nil, ErrEmptyText
	}
	acc := make([]float64, h.Dimensions)
	for _, tok := range Tokens(text) {
		if r := []rune(tok); len(r) > MaxTokenRunes {
			tok = string(r[:MaxTokenRunes]) // a huge "word" (a base64 blob) costs its first runes only
		}
		h.add(acc, "w:"+tok, wordWeight)
		padded := []rune(" " + tok + " ")
		for i := 0; i+3 <= len(padded); i++ {
			h.add(acc, "g:"+string(padded[i:i+3]), trigramWeight)
		}
	}
	var sq float64
	for _, x := range acc {
		sq += x * x
	}
	if sq == 0 {
		return nil, errors.New("text has no features (they cancelled out)")
	}
	norm := math.Sqrt(sq)
	v := make([]float32, h.Dimensions)
	for i, x := range acc {
		v[i] = float32(x / norm)
	}
	return v, nil
}

// MaxTokenRunes bounds a token's features: longer tokens are cut, so
// embedding is linear in the text (SQL's hash_embed cuts them the same way).
const MaxTokenRunes = 64

// add hashes one feature: bytes 0-3 of its MD5 (big endian) pick the
// component, the top bit of byte 4 the sign.
func (h Hash) add(acc []float64, feature string, w float64) {
	sum := md5.Sum([]byte(feature))
	i := binary.BigEndian.Uint32(sum[:4]) % uint32(h.Dimensions)
	if sum[4] < 0x80 {
		acc[i] += w
	} else {
		acc[i] -= w
	}
}

// Tokens folds text with the shared table and splits it into word tokens at
// separators (ASCII punctuation and spaces, Latin-1 symbols, general and CJK
// punctuation). Text made only of separators falls back to its
// whitespace-separated chunks, so "?!" still embeds.
func Tokens(text string) []string {
	folded := strings.Map(foldRune, text)
	toks := strings.FieldsFunc(folded, isSeparator)
	if len(toks) == 0 {
		toks = strings.FieldsFunc(folded, isSpace)
	}
	return toks
}

var foldMap = func() map[rune]rune {
	from, to := []rune(foldFrom), []rune(foldTo)
	m := make(map[rune]rune, len(from))
	for i, r := range from {
		m[r] = to[i]
	}
	return m
}()

func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}
	if l, ok := foldMap[r]; ok {
		return l
	}
	return r
}

// isSpace is the embedder's whitespace: ASCII controls and space, and the
// Unicode spaces. The SQL twin uses the same ranges (see sql/101-hash-embed.sql).
// IsBlank reports whether text holds nothing but whitespace, separators,
// zero-width and control characters: the one definition of "empty", the
// same as SQL's mneme._is_blank (add_message rejects such messages, so no
// job embeds one; a test compares the two on every such character).
func IsBlank(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool { return !isBlankRune(r) }) < 0
}

func isBlankRune(r rune) bool {
	switch {
	case r >= 0x01 && r <= 0x20, r >= 0x7F && r <= 0xA0, r == 0x1680, r == 0x180E,
		r >= 0x2000 && r <= 0x200F, r >= 0x2028 && r <= 0x202F, r >= 0x205F && r <= 0x2064,
		r == 0x3000, r == 0xFEFF:
		return true
	}
	return false
}

func isSpace(r rune) bool {
	switch {
	case r <= 0x20, r == 0x7F, r == 0x85, r == 0xA0, r == 0x1680,
		r >= 0x2000 && r <= 0x200B, r == 0x2028, r == 0x2029, r == 0x202F,
		r == 0x205F, r == 0x3000, r == 0xFEFF:
		return true
	}
	return false
}

// isSeparator: everything in these ranges ends a word token.
func isSeparator(r rune) bool {
	switch {
	case r <= 0x2F, r >= 0x3A && r <= 0x40, r >= 0x5B && r <= 0x60, r >= 0x7B && r <= 0xBF,
		r == 0xD7, r == 0xF7, r == 0x1680,
		r >= 0x2000 && r <= 0x206F, r >= 0x2E00 && r <= 0x2E7F, r >= 0x3000 && r <= 0x303F,
		r >= 0xFE10 && r <= 0xFE1F, r >= 0xFE30 && r <= 0xFE4F, r == 0xFEFF,
		r >= 0xFF00 && r <= 0xFF0F, r >= 0xFF1A && r <= 0xFF20, r >= 0xFF3B && r <= 0xFF40,
		r >= 0xFF5B && r <= 0xFF65:
		return true
	}
	return false
}

// MemoryText is the text of a memory that mneme embeds and indexes for
// BM25: title, summary and content, the non-empty ones joined by newlines;
// a summary equal to the content (mneme.remember writes both) counts once.
// mneme.memory_text(title, summary, content) is its SQL twin.
func MemoryText(title, summary, content string) string {
	if summary == content {
		summary = ""
	}
	parts := make([]string, 0, 3)
	for _, p := range []string{title, summary, content} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "\n")
}
