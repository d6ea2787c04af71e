"""The beam-search tree of one sentence: every candidate beam search expanded, and what
became of it.

``beam_search(..., trace=BeamTrace())`` records, at each step, the 2K best candidates of the
sentence (K = beam size): the node they extend, their token, its log-probability and the
running log-probability, the attention row of the step that scored them, and their fate —
``kept`` (a live beam of the next step), ``ended`` (set aside with <eos>), or ``pruned``.
Live beams at the length limit become ``ended`` too. ``finish`` then marks the n-best that
search returned (``rank`` 1, 2, ...): the tree's surviving leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nmt.data.tokenizer import BOS_ID, EOS_ID


@dataclass
class TreeNode:
    id: int
    parent: int | None  # None: the root (<bos>)
    token: int
    step: int  # 0 for the root; the step that scored it otherwise
    logprob: float  # log p of its token
    log_prob_sum: float  # of the whole path
    status: str = "kept"  # kept | ended | pruned | root
    rank: int = 0  # 1..n for the n-best search returned
    score: float | None = None  # the ranking score, for the n-best
    attention: list[float] = field(default_factory=list)  # the attention row of its step


class BeamTrace:
    """Filled by ``beam_search`` for a batch of one sentence."""

    def __init__(self):
        self.nodes = [TreeNode(0, None, BOS_ID, 0, 0.0, 0.0, "root")]
        self.live: list[int | None] = [0]  # node of each live beam, in the order of search's rows

    def expand(self, step: int, scores, tokens, origins, logprobs, ending, weights, kept_columns, src_lengths):
        """One step's candidates, as beam search holds them for a batch of one sentence:
        scores, tokens, origins (rows of the previous step), logprobs (1, 2K); ending (1, K)
        bool; weights (rows, S) the step's attention; kept_columns (1, K): which candidates
        go on, in search's order (None: search stops here)."""
        if scores.size(0) != 1:
            raise ValueError("a beam trace records a batch of one sentence")
        scores, tokens, origins, logprobs, ending = (t[0] for t in (scores, tokens, origins, logprobs, ending))
        kept = kept_columns[0].tolist() if kept_columns is not None else []
        ends = ending.tolist()
        rows = weights[:, : int(src_lengths[0])].float().cpu()
        new_live = {}
        for column, (score, token, origin, logprob) in enumerate(
            zip(scores.tolist(), tokens.tolist(), origins.tolist(), logprobs.tolist())
        ):
            if score == float("-inf"):
                continue
            if column < len(ends) and ends[column]:
                status = "ended"
            elif token != EOS_ID and column in kept:
                status = "kept"
            else:
                status = "pruned"
            node = TreeNode(
                len(self.nodes), self.live[origin], token, step, logprob, score, status, attention=rows[origin].tolist()
            )
            self.nodes.append(node)
            if status == "kept":
                new_live[column] = node.id
        self.live = [new_live.get(column) for column in kept]  # aligned with search's rows

    def path(self, node_id: int) -> list[int]:
        """The tokens from the root to ``node_id`` (without <bos>)."""
        tokens = []
        parent = self.nodes[node_id].parent
        while parent is not None:
            tokens.append(self.nodes[node_id].token)
            node_id, parent = parent, self.nodes[parent].parent
        return tokens[::-1]

    def finish(self, hypotheses, ended_at_limit: bool) -> None:
        """Mark the n-best ``hypotheses`` search returned among the ended nodes; at the length
        limit (``ended_at_limit``) the live beams became hypotheses too."""
        if ended_at_limit:
            for node_id in self.live:
                if node_id is not None:
                    self.nodes[node_id].status = "ended"
        ended = [node for node in self.nodes if node.status == "ended"]
        for rank, hypothesis in enumerate(hypotheses, start=1):
            wanted = hypothesis.tokens + ([EOS_ID] if hypothesis.ended else [])
            for node in ended:
                if not node.rank and self.path(node.id) == wanted:
                    node.rank, node.score = rank, hypothesis.score
                    break


def kept_column_ids(top_scores: torch.Tensor) -> torch.Tensor:
    """(A, 2K) column numbers, gathered alongside search's kept candidates to know which they were."""
    return torch.arange(top_scores.size(1), device=top_scores.device).expand_as(top_scores)
