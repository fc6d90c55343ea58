// The reference's example (the State page of the API this package mirrors), as written there but
// for the import, the `runs` counter and the lines that open the agent and print what happened:
//
//   node build/examples/conversation.js [STORE]   (STORE defaults to conv.db)
//
// Each run processes once and counts itself in the state, so a second run on the same store
// prints what the first one left there.
import { Agent } from "agent-state";

interface ConvState extends Record<string, unknown> {
  status: "idle" | "processing";
  lastReply: string;
  at: number;
  runs: number;
}

export class Conversation extends Agent<ConvState> {
  protected override initialState(): ConvState {
    return { status: "idle", lastReply: "", at: 0, runs: 0 };
  }

  protected override async onStateChanged(next: ConvState, prev: ConvState): Promise<void> {
    if (next.status !== prev.status) console.log(`onStateChanged: ${prev.status} -> ${next.status}`);
  }

  async process(): Promise<void> {
    await this.setState({ status: "processing" }); // merge: other keys untouched
    // ...
    await this.setState({ status: "idle", at: Date.now() });
  }
}

async function main(): Promise<void> {
  const conv = await Conversation.open(process.argv[2] ?? "conv.db", { agentId: "c1" });
  try {
    const { state: before, version } = await conv.getStateVersioned();
    console.log(
      version === 0
        ? "c1: nothing stored yet (runs 0)"
        : `c1: stored at version ${version} by an earlier run (runs ${before.runs}, status ${before.status})`,
    );
    await conv.process();
    const after = await conv.setState({ runs: before.runs + 1 });
    console.log(`c1: runs ${after.runs}, status ${after.status}, lastReply ${JSON.stringify(after.lastReply)}`);
  } finally {
    await conv.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
