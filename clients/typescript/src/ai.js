// AI SDK (`ai`) tools over mneme: remember, recall and forget for a
// conversation, built with tool() and zod input schemas, and a helper that
// puts mneme.context into a system prompt. Types: ai.d.ts.
import { tool } from 'ai';
import { z } from 'zod';
import { Mneme } from './index.js';

function mnemeOf({ pool, mneme, tenant }) {
  if (mneme) return mneme;
  return new Mneme(pool, { tenant });
}

/**
 * mnemeTools returns { remember, recall, forget } for generateText /
 * streamText's `tools`: each runs one mneme call for `conversation`.
 */
export function mnemeTools(options) {
  const m = mnemeOf(options);
  const conv = options.conversation;
  const budget = options.budget ?? 1000;
  return {
    remember: tool({
      description: 'Store a fact about the user or the task for later conversations (mneme.remember). ' +
        'Write it as a self-contained sentence. mneme revises it against the closest facts itself.',
      inputSchema: z.object({
        content: z.string().describe('the fact, as a self-contained sentence'),
        label: z.string().optional().describe('trivial, temporary, general, user_profile, important or project_<name>'),
      }),
      execute: async ({ content, label }) => ({ memoryId: await m.remember(conv, content, { label }) }),
    }),
    recall: tool({
      description: 'What you should know to answer, from memory: the past turns and facts that match the query, ' +
        'as markdown within a word budget (mneme.context).',
      inputSchema: z.object({
        query: z.string().describe('what you need to know, in plain words'),
        scope: z.enum(['conversation', 'tenant']).optional().describe('conversation (default) or tenant: every conversation of this user'),
      }),
      execute: async ({ query, scope }) => {
        const context = await m.context(conv, query, { budget, scope });
        return { context: context || '(nothing remembered matches)' };
      },
    }),
    forget: tool({
      description: 'Retract a memory the user said is wrong or asked to forget (mneme.forget): it no longer comes back, its history stays.',
      inputSchema: z.object({
        memoryId: z.string().uuid().describe('the memory id (from remember or search)'),
        reason: z.string().describe('why, kept with the memory'),
      }),
      execute: async ({ memoryId, reason }) => {
        await m.forget(memoryId, reason);
        return { ok: true };
      },
    }),
  };
}

/**
 * withMemory returns `system` with mneme.context(conversation, query,
 * budget) appended under a heading (or `system` alone when nothing
 * matches): one call before generateText.
 */
export async function withMemory(options) {
  const m = mnemeOf(options);
  const context = await m.context(options.conversation, options.query, { budget: options.budget ?? 1000, scope: options.scope });
  const system = options.system ?? '';
  if (!context) return system;
  return `${system}${system ? '\n\n' : ''}## What you remember\n\n${context}`;
}
