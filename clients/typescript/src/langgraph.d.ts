import { BaseStore, type Operation, type OperationResults } from '@langchain/langgraph';
import type { Db } from './index.js';

/**
 * A LangGraph.js store over mneme. Namespaces: [tenant, conversation uuid]
 * or [tenant, conversation uuid, label]; keys: memory titles (or ids).
 */
export declare class MnemeStore extends BaseStore {
  constructor(options: { pool: Db; tenant?: string; deleteMode?: 'forget' | 'erase'; reason?: string });
  batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>>;
}
