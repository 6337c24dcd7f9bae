// Types of @mneme-memory/client (index.js). Column names are camelCase.
import type { Pool, Client, PoolClient } from 'pg';

/** The mneme SQL API versions this package supports (mneme.version()). */
export declare const SUPPORTED_API: string;

/** A mneme (or PostgreSQL) error: message is the server's, op the mneme function, sqlstate the SQLSTATE (22004 NULL, 22023 bad value, 42501 privilege, ...), hint mneme's HINT, cause pg's error. */
export declare class MnemeError extends Error {
  constructor(message: string, fields?: { op?: string; sqlstate?: string; hint?: string; detail?: string; cause?: unknown });
  readonly op?: string;
  readonly sqlstate?: string;
  readonly hint?: string;
  readonly detail?: string;
}

export type Db = Pool | Client | PoolClient;
export type Scope = 'conversation' | 'tenant';
export type Role = 'user' | 'assistant' | 'system' | 'tool' | (string & {});
export type Time = Date | string;

export interface SearchOptions {
  /** how many memories (default 5) */
  k?: number;
  /** the query's embedding (real[]); default: the built-in embedder's when configured */
  queryEmbedding?: number[];
  since?: Time;
  until?: Time;
  at?: Time;
  scope?: Scope;
  asOf?: Time;
  includeHistory?: boolean;
}

export interface ContextOptions {
  /** most words (1 to 100000; default 1000) */
  budget?: number;
  queryEmbedding?: number[];
  since?: Time;
  until?: Time;
  at?: Time;
  scope?: Scope;
}

export interface RememberOptions {
  /** trivial, temporary, general, user_profile, important or project_<name> */
  label?: string;
  pinned?: boolean;
  validUntil?: Time;
  /** a memory this one replaces at once (no revise job) */
  supersedes?: string;
  title?: string;
  sourceRef?: string;
  /** when it was said */
  at?: Time;
}

/** A row of mneme.retrieve / mneme.search (type mneme.retrieval). */
export interface Retrieval {
  memoryId: string;
  kind: 'episodic' | 'semantic';
  summary: string | null;
  content: string;
  createdAt: Date;
  score: number;
  rrf: number;
  bm25Rank: number | null;
  vectorRank: number | null;
  retrievability: number;
  title: string | null;
  label: string;
  pinned: boolean;
  bm25Score: number | null;
  vectorDistance: number | null;
  status: string;
  confidenceScore: number;
}

/** A row of mneme.context_items. */
export interface ContextItem {
  item: number;
  memoryId: string;
  kind: string;
  label: string;
  score: number;
  firstAt: Date | null;
  messageIds: number[];
  words: number;
  text: string;
}

/** mneme.inspect. */
export interface Inspection {
  memoryId: string;
  conversationId: string;
  kind: string;
  status: string;
  statusReason: string | null;
  label: string;
  pinned: boolean;
  summary: string | null;
  content: string;
  stability: number;
  difficulty: number;
  lastReviewedAt: Date | null;
  reviewCount: number;
  supersedesId: string | null;
  supersededBy: string | null;
  createdAt: Date;
  confidenceScore: number;
  sourceType: string;
  sourceRef: string | null;
  sourceMessageIds: number[];
  validUntil: Date | null;
  lastConfirmedAt: Date | null;
  confirmsId: string | null;
  invalidatesId: string | null;
  slot: string | null;
  revision: string | null;
}

/** A row of mneme.history. */
export interface HistoryEntry {
  depth: number;
  relation: string;
  memoryId: string;
  status: string;
  statusReason: string | null;
  content: string;
  supersedesId: string | null;
  confidenceScore: number;
  sourceType: string;
  validUntil: Date | null;
  createdAt: Date;
}

/** A row of mneme.conversation_messages. */
export interface Message {
  messageId: number;
  role: string;
  content: string;
  createdAt: Date;
  consumedAt: Date | null;
  memoryId: string | null;
  setAsideJobId: number | null;
}

/** The row of mneme.pop_message: the message taken back. */
export interface PoppedMessage {
  messageId: number;
  role: string;
  content: string;
  createdAt: Date;
}

/** A row of mneme.conversation_memories. */
export interface ConversationMemory {
  memoryId: string;
  kind: string;
  status: string;
  label: string;
  pinned: boolean;
  title: string | null;
  summary: string | null;
  content: string;
  sourceMessageIds: number[];
  sourceFirstAt: Date | null;
  stability: number;
  lastReviewedAt: Date | null;
  reviewCount: number;
  confidenceScore: number;
  supersedesId: string | null;
  createdAt: Date;
}

/** A row of mneme.conversations. */
export interface Conversation {
  conversationId: string;
  messages: number;
  queuedMessages: number;
  memories: number;
  activeMemories: number;
  lastMessageAt: Date | null;
  pendingJobs: number;
  failedJobs: number;
  pendingReviews: number;
}

/**
 * mneme's SQL functions on a pg.Pool or pg.Client. With a tenant each call
 * runs in a transaction that sets it; transaction() groups calls.
 */
export declare class Mneme {
  constructor(db: Db, options?: { tenant?: string });
  /** Checks mneme.version() against SUPPORTED_API (MnemeError on a mismatch or an unmigrated database). */
  static connect(db: Db, options?: { tenant?: string }): Promise<Mneme>;
  readonly tenant: string | undefined;
  withTenant(tenant: string): Mneme;
  /** mneme.set_tenant, inside transaction() only. */
  setTenant(tenant: string): Promise<void>;
  transaction<T>(fn: (m: Mneme) => Promise<T>): Promise<T>;
  version(): Promise<string>;
  checkVersion(): Promise<string>;
  addMessage(conversationId: string, role: Role, content: string, options?: { at?: Time }): Promise<number>;
  segmentNow(conversationId: string): Promise<number | null>;
  /** mneme.pop_message: the latest message, removed (null when none); 55000 once a memory holds it. */
  popMessage(conversationId: string): Promise<PoppedMessage | null>;
  remember(conversationId: string, content: string, options?: RememberOptions): Promise<string>;
  retrieve(conversationId: string, query: string, options?: SearchOptions): Promise<Retrieval[]>;
  search(conversationId: string, query: string, options?: SearchOptions): Promise<Retrieval[]>;
  context(conversationId: string, query: string, options?: ContextOptions & { record?: boolean }): Promise<string>;
  contextItems(conversationId: string, query: string, options?: ContextOptions): Promise<ContextItem[]>;
  forget(memoryId: string, reason: string): Promise<void>;
  erase(memoryId: string, reason: string): Promise<void>;
  /** Returns the number of memories erased. */
  eraseConversation(conversationId: string, reason: string): Promise<number>;
  pin(memoryId: string): Promise<void>;
  unpin(memoryId: string): Promise<void>;
  inspect(memoryId: string): Promise<Inspection>;
  history(memoryId: string): Promise<HistoryEntry[]>;
  messages(conversationId: string): Promise<Message[]>;
  memories(conversationId: string): Promise<ConversationMemory[]>;
  conversations(options?: { k?: number }): Promise<Conversation[]>;
  hashEmbed(text: string): Promise<number[]>;
}
