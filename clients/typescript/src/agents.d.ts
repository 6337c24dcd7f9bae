import type { AgentInputItem, Session } from '@openai/agents';
import type { Db, Mneme } from './index.js';

export declare class MnemeSession implements Session {
  constructor(options: { pool?: Db; mneme?: Mneme; tenant?: string; conversation: string; clearReason?: string });
  getSessionId(): Promise<string>;
  getItems(limit?: number): Promise<AgentInputItem[]>;
  addItems(items: AgentInputItem[]): Promise<void>;
  /** Always rejects with a MnemeError (0A000): mneme's messages are append-only. */
  popItem(): Promise<AgentInputItem | undefined>;
  /** mneme.erase_conversation: deletes the conversation for good (mneme_admin). */
  clearSession(): Promise<void>;
}
