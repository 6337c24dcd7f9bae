import type { AgentInputItem, Session } from '@openai/agents';
import type { Db, Mneme } from './index.js';

export declare class MnemeSession implements Session {
  constructor(options: { pool?: Db; mneme?: Mneme; tenant?: string; conversation: string; clearReason?: string });
  getSessionId(): Promise<string>;
  getItems(limit?: number): Promise<AgentInputItem[]>;
  addItems(items: AgentInputItem[]): Promise<void>;
  /** mneme.pop_message: the latest item, removed (undefined when none); a MnemeError 55000 once a memory holds it. */
  popItem(): Promise<AgentInputItem | undefined>;
  /** mneme.erase_conversation: deletes the conversation for good (mneme_admin). */
  clearSession(): Promise<void>;
}
