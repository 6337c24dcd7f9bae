import type { Tool } from 'ai';
import type { Db, Mneme, Scope } from './index.js';

export interface MnemeToolsOptions {
  /** a pg.Pool or pg.Client (or pass mneme) */
  pool?: Db;
  mneme?: Mneme;
  tenant?: string;
  /** the conversation's uuid */
  conversation: string;
  /** recall's word budget (default 1000) */
  budget?: number;
}

export declare function mnemeTools(options: MnemeToolsOptions): {
  remember: Tool<{ content: string; label?: string }, { memoryId: string }>;
  recall: Tool<{ query: string; scope?: Scope }, { context: string }>;
  forget: Tool<{ memoryId: string; reason: string }, { ok: boolean }>;
};

export declare function withMemory(options: MnemeToolsOptions & { query: string; system?: string; scope?: Scope }): Promise<string>;
