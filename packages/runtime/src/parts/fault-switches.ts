import { FAULT_NAMES, isSwitchboard } from '@idem/faults';
import { answer, requireOperator, route } from '@idem/http';
import { z } from 'zod';
import type { ServicePart } from '../context.js';

const startedAt = new Date().toISOString();

const rule = z.object({
  name: z.enum(FAULT_NAMES),
  target: z.string().min(1).max(200).optional(),
  probability: z.number().min(0).max(1).default(1),
  count: z.number().int().min(1).max(1_000_000).optional(),
});

/** What both routes answer: the process, its switches and the rules now set. */
const switchboardState = z.object({
  process: z.string(),
  pid: z.number().int(),
  startedAt: z.iso.datetime(),
  switches: z.array(z.enum(FAULT_NAMES)),
  rules: z.array(rule),
});

/**
 * The process's fault switches, for an operator (the teaching console): only in a process
 * started with IDEM_FAULTS_ENABLED=1 — elsewhere these routes do not exist — and only with the
 * operator token or FAULTS_TOKEN. Every process has them, whatever its roles, since each runs its own switches.
 */
export function faultSwitches(): ServicePart {
  return {
    name: 'fault switches',
    start: ({ faults, process: name, operators, config }) => ({
      routes(app) {
        if (!isSwitchboard(faults)) return;
        // The operator, or the switches' own token (FAULTS_TOKEN), which opens nothing else.
        const switches = config.FAULTS_TOKEN ? [{ name: 'fault-switches', token: config.FAULTS_TOKEN }] : [];
        const admin = requireOperator([...operators, ...switches]);
        const state = () => ({
          process: name,
          pid: process.pid,
          startedAt,
          switches: FAULT_NAMES,
          rules: faults.rules(),
        });
        route(
          app,
          {
            method: 'get',
            path: '/faults',
            summary: "This process's fault switches (only with IDEM_FAULTS_ENABLED=1)",
            audience: 'operator',
            use: [admin],
            responses: { 200: answer('The switches and the rules set', switchboardState) },
          },
          (_input, _req, res) => void res.json(state()),
        );
        route(
          app,
          {
            method: 'put',
            path: '/faults',
            summary: 'Replace the fault rules',
            audience: 'operator',
            use: [admin],
            body: z.object({ rules: z.array(rule).max(50) }),
            responses: { 200: answer('The switches and the rules now set', switchboardState) },
          },
          ({ body: { rules } }, _req, res) => {
            faults.replace(rules);
            res.json(state());
          },
        );
      },
    }),
  };
}
