"""The kinds of Impl node: what a rewrite decides, one module per kind.

A node kind owns everything about itself: its sub-Specs (``children``), the decision the
memo table stores for it (``decision``), its cost and peak memory from its children's
(``cost``, ``peaks``), the C it emits (``emit``) and what that C needs (``headers``,
``requires``). The search, the memo table, the code generator and the pretty-printer ask the
node and never switch on its type, so a new kind is a new module here (and the rewrite that
makes it). ``morello.impl.Action`` is the protocol every kind implements.
"""

from __future__ import annotations

from morello.nodes.block import BlockAction
from morello.nodes.init_loop import InitLoopAction
from morello.nodes.kernel import KernelAction
from morello.nodes.loop import LoopAction
from morello.nodes.move import MoveAction
from morello.nodes.parallel import ParallelLoopAction
from morello.nodes.reside import ResideAction
from morello.nodes.split_fuse import SplitFuseAction

__all__ = [
    "BlockAction",
    "InitLoopAction",
    "KernelAction",
    "LoopAction",
    "MoveAction",
    "ParallelLoopAction",
    "ResideAction",
    "SplitFuseAction",
]
