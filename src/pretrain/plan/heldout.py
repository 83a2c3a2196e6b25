"""The held-out published runs: added in session 7, after the time model was built and without
changing any of its constants, to find out how it predicts clusters it was not checked against
while it was written (tests/test_plan_published.py, docs/planner.md "Held-out runs"). The rows the
model was built beside are pretrain.plan.published.runs(); these are kept apart so the two error
figures stay separate.

- MosaicML llm-foundry, scripts/train/benchmarking/README.md (rows unchanged since commit 5e85bd6,
  2024-01, to the 2025 head): every bf16 row of its MPT throughput tables, 209 runs of 125M-70B on
  8-512 A100 40GB / 80GB and H100, FSDP (Composer), sequence 512 to 65,536, with and without
  activation checkpointing; tokens/s as printed. The FP8 table is left out (TransformerEngine fp8
  layers: not a bf16 prediction).
- Megatron-Turing NLG 530B (Smith et al. 2022, sec. 2.4, as quoted with its setup by llm-analysis'
  examples/megatron-turing-nlg): 280, 350 and 420 DGX A100 nodes, iteration time as printed.
- torchtitan docs/performance.md, its Llama 2 table (the Llama 3 table's rows are in published.py):
  13B and 70B with FSDP2 on 64 A100 80GB, tokens/s per GPU as printed; and the "FSDP +
  torch.compile" rows of its elastic-scaling Tables 1 and 3 (Llama 3.1 8B on 8 and 128 Grand Teton
  H100s; the rows without compile are in published.py, the Float8 rows are left out: no fp8 GEMMs
  in the time model).
- IBM / PyTorch fms-fsdp (README's throughput table, 2024-02, and "Maximizing training throughput
  using PyTorch FSDP", PyTorch blog 2024-03, Table 1; before torch.compile, added in a later post):
  Llama 2 at 4,096 tokens, HSDP (sharded within a node, replicated across nodes), no activation
  checkpointing: 7B (local batch 2) and 13B (1) on 128 A100s, 3,760 and 1,700 tokens/s per GPU
  (README); 7B on 96 H100s, 7,500 (blog; its 13B rows checkpoint every n-th block, a policy not
  modelled). Added in session 13.

`measured_step_s` is the printed iteration time, or the global batch over the printed tokens/s.
"""

from __future__ import annotations

from dataclasses import replace

from pretrain.plan.hardware import get_gpu
from pretrain.plan.layout import Layout, data_parallel
from pretrain.plan.published import Run, _torchtitan
from pretrain.plan.search import Job
from pretrain.plan.shapes import ModelShape, _gpt, get_shape

# MPT as the benchmark builds it (scripts/train/yamls/pretrain/mpt-*.yaml): GPT-2 style blocks with
# biases, LayerNorm, GELU MLP of 4h, tied embeddings, vocabulary 50,368, and learned positions (the
# printed NumParams grow by d_model per token of sequence, as a position table does): (L, h, heads).
MPT = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12), "1b": (24, 2048, 16),
       "3b": (32, 2560, 20), "7b": (32, 4096, 32), "13b": (40, 5120, 40), "30b": (48, 7168, 56),
       "70b": (80, 8192, 64)}
MPT_VOCAB = 50_368

# The tables' GPUs: A100s on "1600 Gbps node-node interconnect (RoCE)", i.e. 8 x 200 Gb/s per node
# (the a100 entries' 25 GB/s per GPU); the H100 interconnect is not printed (the h100 entry's 400 Gb/s).
FOUNDRY_GPU = {"h100-2024": "h100", "h100": "h100", "a100-80": "a100-80gb", "a100-40": "a100-40gb"}

# What the benchmark ran (sweep.sh and submit_benchmarks.py at the commits that wrote each table):
# - attention: the H100, A100 80GB and A100 40GB tables (commit b2a43a1, 2023-10: sweep.sh runs
#   llm-foundry v0.0.4 on the mosaicml/pytorch:2.1.0_cu121 image) set attn_impl "triton", the
#   Triton port of FlashAttention-1; the large-scale H100 table (5e85bd6, 2024-01) installed the
#   gpu-flash2 extra (flash-attn 2.4.2).
# - element-wise kernels: eager PyTorch (no torch.compile), but MPT's block is one F.layer_norm
#   kernel per norm, one GELU kernel, biases inside the matmul and two residual adds: the bytes the
#   planner's fused GPT-block profile counts, not its eager profile (our trainer's RMSNorm in fp32
#   ops, rotary and GQA copies), so kernels="fused".
# - dropout: none (MPTConfig's resid_pdrop, emb_pdrop and attn_pdrop default to 0.0 and the
#   benchmark's yamls set none), so a block saves no dropout masks: dropout=False.
# - gradients reduced in fp32 under Composer's DEFAULT mixed precision, in bf16 under PURE.
# - FULL_SHARD is ZeRO-3, SHARD_GRAD_OP ZeRO-2; activation checkpointing wraps each whole block.
FLASH1_TABLES = ("h100", "a100-80", "a100-40")

# table, model, seq, GPUs, micro-batch, grad. accumulation, tokens/s, checkpointing, mixed
# precision, sharding, NumParams: the README's rows in its order (global batch = GPUs x mbs x accum).
FOUNDRY_ROWS = """
h100-2024  70b  2048 512   8  1   515636 ac DEFAULT FULL_SHARD    64862437376
h100-2024  70b  2048 256   8  1   265149 ac DEFAULT FULL_SHARD    64862437376
h100-2024  70b  2048 128   8  1   135490 ac DEFAULT FULL_SHARD    64862437376
h100-2024  30b  2048 512   8  1  1083366 ac DEFAULT FULL_SHARD    29975214080
h100-2024  30b  2048 256   8  1   550022 ac DEFAULT FULL_SHARD    29975214080
h100-2024  30b  2048 128   8  1   281491 ac DEFAULT FULL_SHARD    29975214080
h100-2024  13b  2048 512  16  1  2535811 ac DEFAULT FULL_SHARD    12853954560
h100-2024  13b  2048 256  16  1  1277214 ac DEFAULT FULL_SHARD    12853954560
h100-2024  13b  2048 128  16  1   650264 ac DEFAULT FULL_SHARD    12853954560
h100-2024   7b  2048 512   6  1  4951479 -  DEFAULT FULL_SHARD    6658859008
h100-2024   7b  2048 256   6  1  2590548 -  DEFAULT FULL_SHARD    6658859008
h100-2024   7b  2048 128   6  1  1340830 -  DEFAULT FULL_SHARD    6658859008
h100-2024   3b  2048 512   8  1 11092218 -  DEFAULT SHARD_GRAD_OP 2651837440
h100-2024   3b  2048 256   8  1  5829686 -  DEFAULT SHARD_GRAD_OP 2651837440
h100-2024   3b  2048 128   8  1  2998098 -  DEFAULT SHARD_GRAD_OP 2651837440
h100-2024   1b  2048 512  12  1 20396905 -  DEFAULT SHARD_GRAD_OP 1315950592
h100-2024   1b  2048 256  12  1 10894207 -  DEFAULT SHARD_GRAD_OP 1315950592
h100-2024   1b  2048 128  12  1  5647854 -  DEFAULT SHARD_GRAD_OP 1315950592
h100       70b  2048  64   8  4    66523 ac DEFAULT FULL_SHARD    64862437376
h100       70b  2048  32   2 16    28242 ac DEFAULT FULL_SHARD    64862437376
h100       30b  8192   8   1 21    11072 ac DEFAULT FULL_SHARD    30019254272
h100       30b  4096   8   1 21    14419 ac DEFAULT FULL_SHARD    29989894144
h100       30b  2048  32  14  3    73860 ac DEFAULT FULL_SHARD    29975214080
h100       30b  2048  16  10  3    36209 ac DEFAULT FULL_SHARD    29975214080
h100       30b  2048   8   3 21    16022 ac DEFAULT FULL_SHARD    29975214080
h100       30b  1024   8   6 21    16672 ac DEFAULT FULL_SHARD    29967874048
h100       13b 32768   8   1  3    15812 ac DEFAULT FULL_SHARD    13011240960
h100       13b 16384   8   3  3    23881 ac DEFAULT FULL_SHARD    12927354880
h100       13b  4096   8  10  3    37740 ac DEFAULT FULL_SHARD    12864440320
h100       13b  2048  64   2  1   307209 -  DEFAULT FULL_SHARD    12853954560
h100       13b  2048  32   2  1   153960 -  DEFAULT FULL_SHARD    12853954560
h100       13b  2048  16   2  1    76280 -  DEFAULT FULL_SHARD    12853954560
h100       13b  2048   8   2  1    38336 -  DEFAULT FULL_SHARD    12853954560
h100       13b  1024   8  40  3    44019 ac DEFAULT FULL_SHARD    12848711680
h100        7b 65536   8   1  2    15654 ac DEFAULT FULL_SHARD    6918905856
h100        7b 32768   8   2  2    26550 ac DEFAULT FULL_SHARD    6784688128
h100        7b  8192   8   8  2    55481 ac DEFAULT FULL_SHARD    6684024832
h100        7b  4096   8  16  2    68893 ac DEFAULT FULL_SHARD    6667247616
h100        7b  2048   8   6  1    85144 -  DEFAULT FULL_SHARD    6658859008
h100        7b  1024   8  64  2    81628 ac DEFAULT FULL_SHARD    6654664704
h100        3b 65536   8   1  2    26099 ac DEFAULT FULL_SHARD    2814366720
h100        3b 32768   8   3  6    46984 ac DEFAULT FULL_SHARD    2730480640
h100        3b 16384   8   1  6    89223 -  DEFAULT FULL_SHARD    2688537600
h100        3b  8192   8   3  6   132626 -  DEFAULT FULL_SHARD    2667566080
h100        3b  4096   8   5  6   167712 -  DEFAULT FULL_SHARD    2657080320
h100        3b  2048  64   6  3  1441663 -  DEFAULT FULL_SHARD    2651837440
h100        3b  2048  32   6  3   736701 -  DEFAULT FULL_SHARD    2651837440
h100        3b  2048  16  10  3   386285 -  DEFAULT FULL_SHARD    2651837440
h100        3b  1024   8  20  6   216369 -  DEFAULT FULL_SHARD    2649216000
h100        3b   512   8  40  6   223721 -  DEFAULT FULL_SHARD    2647905280
h100        1b 65536   8   1  2    44050 ac DEFAULT FULL_SHARD    1445974016
h100        1b 32768   8   1  4    96203 -  DEFAULT FULL_SHARD    1378865152
h100        1b 16384   8   2  4   157194 -  DEFAULT FULL_SHARD    1345310720
h100        1b  8192   8   3  4   233256 -  DEFAULT FULL_SHARD    1328533504
h100        1b  4096   8   7  4   308282 -  DEFAULT FULL_SHARD    1320144896
h100        1b  2048  64  20  1  2841754 -  DEFAULT FULL_SHARD    1315950592
h100        1b  2048  32  20  1  1444183 -  DEFAULT FULL_SHARD    1315950592
h100        1b  2048  16  20  1   736596 -  DEFAULT FULL_SHARD    1315950592
h100        1b  2048   8  14  1   363645 -  DEFAULT FULL_SHARD    1315950592
h100        1b  1024   8  18  4   391287 -  DEFAULT FULL_SHARD    1313853440
h100        1b   512   8  56  4   418201 -  DEFAULT FULL_SHARD    1312804864
h100      760m 32768   8   1  2   130333 -  DEFAULT FULL_SHARD    807656448
h100      760m 16384   8   3  2   222521 -  DEFAULT FULL_SHARD    782490624
h100      760m  8192   8   6  2   334602 -  DEFAULT FULL_SHARD    769907712
h100      760m  4096   8  12  2   443674 -  DEFAULT FULL_SHARD    763616256
h100      760m  2048  32  24  1  2175091 -  DEFAULT FULL_SHARD    760470528
h100      760m  2048  16  24  1  1096819 -  DEFAULT FULL_SHARD    760470528
h100      760m  2048   8  24  2   505177 -  DEFAULT FULL_SHARD    760470528
h100      760m  1024   8  48  2   628648 -  DEFAULT FULL_SHARD    758897664
h100      760m   512   8  96  2   669998 -  DEFAULT FULL_SHARD    758111232
a100-80    70b  2048  64   8  4    26274 ac PURE    FULL_SHARD    64862437376
a100-80    70b  2048  32   2 16    11962 ac PURE    FULL_SHARD    64862437376
a100-80    30b  8192   8   1 21     4594 ac DEFAULT FULL_SHARD    30019254272
a100-80    30b  4096   8   1 21     6513 ac DEFAULT FULL_SHARD    29989894144
a100-80    30b  2048   8   3 21     7330 ac DEFAULT FULL_SHARD    29975214080
a100-80    30b  1024   8   6 21     7571 ac DEFAULT FULL_SHARD    29967874048
a100-80    30b   512   8  12 21     7739 ac DEFAULT FULL_SHARD    29964204032
a100-80    13b 32768   8   1  3     8134 ac DEFAULT FULL_SHARD    13011240960
a100-80    13b 16384   8   3  3    11454 ac DEFAULT FULL_SHARD    12927354880
a100-80    13b  8192   8   5  3    14362 ac DEFAULT FULL_SHARD    12885411840
a100-80    13b  4096   8  10  3    16482 ac DEFAULT FULL_SHARD    12864440320
a100-80    13b  2048   8   2  3    18097 -  DEFAULT FULL_SHARD    12853954560
a100-80    13b  1024   8  40  3    18647 ac DEFAULT FULL_SHARD    12848711680
a100-80     7b 65536   8   1  2     8108 ac DEFAULT FULL_SHARD    6918905856
a100-80     7b 32768   8   2  2    13382 ac DEFAULT FULL_SHARD    6784688128
a100-80     7b 16384   8   4  2    19629 ac DEFAULT FULL_SHARD    6717579264
a100-80     7b  8192   8   8  2    25655 ac DEFAULT FULL_SHARD    6684024832
a100-80     7b  4096   8  16  2    29472 ac DEFAULT FULL_SHARD    6667247616
a100-80     7b  2048   8   6  2    37130 -  DEFAULT FULL_SHARD    6658859008
a100-80     7b  1024   8  64  2    34857 ac DEFAULT FULL_SHARD    6654664704
a100-80     3b 65536   8   1  2    14137 ac DEFAULT FULL_SHARD    2814366720
a100-80     3b 32768   8   3  6    24235 ac DEFAULT FULL_SHARD    2730480640
a100-80     3b 16384   8   1  6    44233 -  DEFAULT FULL_SHARD    2688537600
a100-80     3b  8192   8   3  6    61567 -  DEFAULT FULL_SHARD    2667566080
a100-80     3b  4096   8   5  6    75658 -  DEFAULT FULL_SHARD    2657080320
a100-80     3b  2048   8  10  2    86491 -  DEFAULT FULL_SHARD    2651837440
a100-80     3b  1024   8  20  6    92643 -  DEFAULT FULL_SHARD    2649216000
a100-80     3b   512   8  40  6    97019 -  DEFAULT FULL_SHARD    2647905280
a100-80     1b 65536   8   1  2    24353 ac DEFAULT FULL_SHARD    1445974016
a100-80     1b 32768   8   1  4    50207 -  DEFAULT FULL_SHARD    1378865152
a100-80     1b 16384   8   2  4    79650 -  DEFAULT FULL_SHARD    1345310720
a100-80     1b  8192   8   3  4   110516 -  DEFAULT FULL_SHARD    1328533504
a100-80     1b  4096   8   7  4   142457 -  DEFAULT FULL_SHARD    1320144896
a100-80     1b  2048   8  14  4   164109 -  DEFAULT FULL_SHARD    1315950592
a100-80     1b  1024   8  18  4   176898 -  DEFAULT FULL_SHARD    1313853440
a100-80     1b   512   8  56  4   185186 -  DEFAULT FULL_SHARD    1312804864
a100-80   760m 65536   8   1  2    33150 ac DEFAULT FULL_SHARD    857988096
a100-80   760m 32768   8   1  2    70417 -  DEFAULT FULL_SHARD    807656448
a100-80   760m 16384   8   3  2   114198 -  DEFAULT FULL_SHARD    782490624
a100-80   760m  8192   8   6  2   167471 -  DEFAULT FULL_SHARD    769907712
a100-80   760m  4096   8  12  2   218808 -  DEFAULT FULL_SHARD    763616256
a100-80   760m  2048   8  24  2   259472 -  DEFAULT FULL_SHARD    760470528
a100-80   760m  1024   8  48  2   238122 -  DEFAULT FULL_SHARD    758897664
a100-80   760m   512   8  96  2   235571 -  DEFAULT FULL_SHARD    758111232
a100-80   350m 65536   8   1  2    60195 -  DEFAULT FULL_SHARD    420997120
a100-80   350m 32768   8   2  2   109222 -  DEFAULT FULL_SHARD    387442688
a100-80   350m 16384   8   4  2   188478 -  DEFAULT FULL_SHARD    370665472
a100-80   350m  8192   8   8  2   292559 -  DEFAULT FULL_SHARD    362276864
a100-80   350m  4096   8  16  2   396442 -  DEFAULT FULL_SHARD    358082560
a100-80   350m  2048   8  32  2   470263 -  DEFAULT FULL_SHARD    355985408
a100-80   350m  1024   8  64  2   518504 -  DEFAULT FULL_SHARD    354936832
a100-80   350m   512   8 128  2   554643 -  DEFAULT FULL_SHARD    354412544
a100-80   125m 65536   8   1  2   162946 -  DEFAULT FULL_SHARD    174070272
a100-80   125m 32768   8   2  2   291256 -  DEFAULT FULL_SHARD    148904448
a100-80   125m 16384   8   4  2   480322 -  DEFAULT FULL_SHARD    136321536
a100-80   125m  8192   8   8  2   723142 -  DEFAULT FULL_SHARD    130030080
a100-80   125m  4096   8  16  2   947172 -  DEFAULT FULL_SHARD    126884352
a100-80   125m  2048   8  40  2  1142641 -  DEFAULT FULL_SHARD    125311488
a100-80   125m  2048   8  32  2  1133901 -  DEFAULT FULL_SHARD    125311488
a100-80   125m  1024   8  64  2  1251751 -  DEFAULT FULL_SHARD    124525056
a100-80   125m   512   8 128  2  1325455 -  DEFAULT FULL_SHARD    124131840
a100-40    70b  2048 128   4  1    48194 ac PURE    FULL_SHARD    64862437376
a100-40    70b  2048  64   2  1    17672 ac PURE    FULL_SHARD    64862437376
a100-40    30b  2048 128   6  1   110803 ac PURE    FULL_SHARD    29975214080
a100-40    30b  2048  32   4  1    27431 ac PURE    FULL_SHARD    29975214080
a100-40    13b  8192   8   1 16    11258 ac PURE    FULL_SHARD    12885411840
a100-40    13b  4096   8   2 16    12830 ac PURE    FULL_SHARD    12864440320
a100-40    13b  2048 128  16  1   252444 ac PURE    FULL_SHARD    12853954560
a100-40    13b  2048  64  16  1   126479 ac PURE    FULL_SHARD    12853954560
a100-40    13b  2048  32  14  1    63946 ac PURE    FULL_SHARD    12853954560
a100-40    13b  2048  16  10  1    31900 ac PURE    FULL_SHARD    12853954560
a100-40    13b  2048   8   4 16    13347 ac PURE    FULL_SHARD    12853954560
a100-40    13b  1024   8   8 16    13817 ac PURE    FULL_SHARD    12848711680
a100-40    13b   512   8  16 16    14108 ac PURE    FULL_SHARD    12846090240
a100-40     7b 16384   8   1  4    17998 ac PURE    FULL_SHARD    6717579264
a100-40     7b  8192   8   3  4    23098 ac PURE    FULL_SHARD    6684024832
a100-40     7b  4096   8   6  4    26930 ac PURE    FULL_SHARD    6667247616
a100-40     7b  2048 128  18  1   463749 ac PURE    FULL_SHARD    6658859008
a100-40     7b  2048  64  18  1   234614 ac PURE    FULL_SHARD    6658859008
a100-40     7b  2048  32  18  1   119202 ac PURE    FULL_SHARD    6658859008
a100-40     7b  2048  16  16  1    58322 ac PURE    FULL_SHARD    6658859008
a100-40     7b  2048   8  12  4    29436 ac PURE    FULL_SHARD    6658859008
a100-40     7b  1024   8  24  4    30833 ac PURE    FULL_SHARD    6654664704
a100-40     7b   512   8  48  4    31167 ac PURE    FULL_SHARD    6652567552
a100-40     3b 32768   8   1  4    23640 ac PURE    FULL_SHARD    2730480640
a100-40     3b 16384   8   2  8    35726 ac PURE    FULL_SHARD    2688537600
a100-40     3b  8192   8   1  8    57193 -  PURE    FULL_SHARD    2667566080
a100-40     3b  4096   8   2  8    70223 -  PURE    FULL_SHARD    2657080320
a100-40     3b  2048 128   6  1  1220885 -  PURE    FULL_SHARD    2651837440
a100-40     3b  2048  64   6  1   623167 -  PURE    FULL_SHARD    2651837440
a100-40     3b  2048  32   6  1   317261 -  PURE    FULL_SHARD    2651837440
a100-40     3b  2048  16   5  1   156013 -  PURE    FULL_SHARD    2651837440
a100-40     3b  2048   8   5  8    80520 -  PURE    FULL_SHARD    2651837440
a100-40     3b  1024   8  10  8    85854 -  PURE    FULL_SHARD    2649216000
a100-40     3b   512   8  20  8    90596 -  PURE    FULL_SHARD    2647905280
a100-40     1b 32768   8   1  4    40762 ac PURE    FULL_SHARD    1378865152
a100-40     1b 16384   8   1  8    77723 -  PURE    FULL_SHARD    1345310720
a100-40     1b  8192   8   2  8   107799 -  PURE    FULL_SHARD    1328533504
a100-40     1b  4096   8   4  8   134851 -  PURE    FULL_SHARD    1320144896
a100-40     1b  2048 128  10  1  2386897 -  PURE    FULL_SHARD    1315950592
a100-40     1b  2048  64  10  1  1216104 -  PURE    FULL_SHARD    1315950592
a100-40     1b  2048  32  10  1   497782 -  PURE    FULL_SHARD    1315950592
a100-40     1b  2048  16   8  1   305372 -  PURE    FULL_SHARD    1315950592
a100-40     1b  2048   8   8  8   154171 -  PURE    FULL_SHARD    1315950592
a100-40     1b  1024   8  16  8   167677 -  PURE    FULL_SHARD    1313853440
a100-40     1b   512   8  32  8   174256 -  PURE    FULL_SHARD    1312804864
a100-40   760m 32768   8   1  4    57464 ac PURE    FULL_SHARD    807656448
a100-40   760m 16384   8   1  4   111316 -  PURE    FULL_SHARD    782490624
a100-40   760m  8192   8   3  4   160853 -  PURE    FULL_SHARD    769907712
a100-40   760m  4096   8   6  4   206909 -  PURE    FULL_SHARD    763616256
a100-40   760m  2048 128  12  1  3704382 -  PURE    FULL_SHARD    760470528
a100-40   760m  2048  64  12  1  1878030 -  PURE    FULL_SHARD    760470528
a100-40   760m  2048  32  12  1   948745 -  PURE    FULL_SHARD    760470528
a100-40   760m  2048  16  12  1   473723 -  PURE    FULL_SHARD    760470528
a100-40   760m  2048   8  12  4   241389 -  PURE    FULL_SHARD    760470528
a100-40   760m  1024   8  24  4   267376 -  PURE    FULL_SHARD    758897664
a100-40   760m   512   8  48  4   279504 -  PURE    FULL_SHARD    758111232
a100-40   350m 32768   8   1  4   107329 -  PURE    FULL_SHARD    387442688
a100-40   350m 16384   8   2  4   183175 -  PURE    FULL_SHARD    370665472
a100-40   350m  8192   8   4  4   279466 -  PURE    FULL_SHARD    362276864
a100-40   350m  4096   8   8  4   374670 -  PURE    FULL_SHARD    358082560
a100-40   350m  2048 128  18  1  6647647 -  PURE    FULL_SHARD    355985408
a100-40   350m  2048  64  18  1  3372118 -  PURE    FULL_SHARD    355985408
a100-40   350m  2048  32  18  1  1721978 -  PURE    FULL_SHARD    355985408
a100-40   350m  2048  16  18  1   886622 -  PURE    FULL_SHARD    355985408
a100-40   350m  2048   8  16  4   447963 -  PURE    FULL_SHARD    355985408
a100-40   350m  1024   8  32  4   500184 -  PURE    FULL_SHARD    354936832
a100-40   350m   512   8  64  4   530277 -  PURE    FULL_SHARD    354412544
a100-40   125m 32768   8   1  4   261208 -  PURE    FULL_SHARD    148904448
a100-40   125m 16384   8   2  3   443876 -  PURE    FULL_SHARD    136321536
a100-40   125m  8192   8   5  3   694868 -  PURE    FULL_SHARD    130030080
a100-40   125m  4096   8  13  3   921297 -  PURE    FULL_SHARD    126884352
a100-40   125m  2048 128  26  1 15863837 -  PURE    FULL_SHARD    125311488
a100-40   125m  2048  64  26  1  8015010 -  PURE    FULL_SHARD    125311488
a100-40   125m  2048  32  26  1  4067922 -  PURE    FULL_SHARD    125311488
a100-40   125m  2048  16  26  1  2088560 -  PURE    FULL_SHARD    125311488
a100-40   125m  2048   8  26  3  1090678 -  PURE    FULL_SHARD    125311488
a100-40   125m  1024   8  52  3  1186314 -  PURE    FULL_SHARD    124525056
a100-40   125m   512   8 104  3  1253886 -  PURE    FULL_SHARD    124131840
"""


def mpt_shape(model: str, seq: int) -> ModelShape:
    L, h, a = MPT[model]
    return _gpt(f"mpt-{model}", L, h, a, MPT_VOCAB, seq)


def foundry_rows() -> list[tuple]:
    """The table above parsed: (table, model, seq, gpus, mbs, accum, tokens_per_s, ac, mp, shard, params)."""
    out = []
    for line in FOUNDRY_ROWS.strip().splitlines():
        t, model, seq, g, mbs, acc, tps, ac, mp, shard, params = line.split()
        out.append((t, model, int(seq), int(g), int(mbs), int(acc), float(tps), ac == "ac", mp, shard,
                    int(params)))
    return out


def _foundry(row: tuple) -> Run:
    t, model, seq, g, mbs, acc, tps, ac, mp, shard, _ = row
    shape = mpt_shape(model, seq)
    batch = g * mbs * acc * seq
    job = Job(shape, get_gpu(FOUNDRY_GPU[t]), g, batch, kernels="fused", dropout=False,
              reduce_dtype="bf16" if mp == "PURE" else "fp32",
              attention="flash1" if t in FLASH1_TABLES else "flash2")
    lay = Layout(dp_shard=g, zero=3 if shard == "FULL_SHARD" else 2, mbs=mbs,
                 recompute="full" if ac else "none")
    label = f"llm-foundry {t} MPT-{model} seq {seq} on {g}, mbs {mbs}{', AC' if ac else ''}"
    return Run(label, job, lay, batch / tps)


def _mt_nlg(nodes: int, step_s: float) -> Run:
    # 530B (105 x 20,480, 128 heads, s = 2,048) on DGX A100 80GB (Selene: HDR InfiniBand, 8 x 200 Gb/s
    # per node), TP 8 x PP 35 and the rest data parallel, global batch 1,920, micro-batch 1, full
    # recompute, Megatron kernels (no fused attention), fp32 gradients, 1F1B. Data parallelism is
    # ZeRO's (the paper's 3D parallelism: ZeRO data, Megatron tensor, 1F1B pipeline); its stage is
    # not printed: ZeRO-1, the one DeepSpeed's pipeline engine runs (ZeRO-0 predicts the same step
    # within 0.1% at 8-12 data-parallel ranks).
    shape = get_shape("megatron-530b")
    gpus = nodes * 8
    job = Job(shape, get_gpu("a100-80gb"), gpus, 1920 * shape.seq_len, accounting="18B", flash=False)
    lay = data_parallel(gpus // 280, 1, tp=8, pp=35, mbs=1, recompute="full")
    return Run(f"MT-NLG 530B on {nodes} DGX A100 nodes", job, lay, step_s, (0, 1))


def _torchtitan_llama2() -> list[Run]:
    # Sequence 4,096, local batch 2 (70B with selective op checkpointing: 1, as its footnote says),
    # the software of published._torchtitan_runs (eager, per-op selective policy, fp32 reduction);
    # the "selective layer" rows are left out as there (that policy is not modelled).
    def run(label: str, name: str, mbs: int, recompute: str, wps: float) -> Run:
        lay = Layout(dp_shard=64, zero=3, mbs=mbs, recompute=recompute)
        return _torchtitan(f"Llama 2 {label} on 64 A100, FSDP", name, "a100-80gb", 64, lay, wps)

    return [run("13B, no AC", "llama-2-13b", 2, "none", 2162),
            run("13B, selective op AC", "llama-2-13b", 2, "selective", 1904),
            run("70B, selective op AC", "llama-2-70b", 1, "selective", 355),
            run("70B, full AC", "llama-2-70b", 2, "full", 353)]


def _torchtitan_compiled() -> list[Run]:
    # torch.compile fuses each block's element-wise ops (norms, rotary, SwiGLU): kernels="fused";
    # everything else as the rows without compile (published._torchtitan_runs).
    out = []
    for gpus, wps, gib in ((8, 6667, 77.0), (128, 6514, 62.0)):  # Memory(GiB) as printed
        lay = Layout(dp_shard=gpus, zero=3, mbs=2, recompute="selective")
        r = _torchtitan(f"Llama 3.1 8B on {gpus} H100 (500 W), FSDP + torch.compile", "llama-3-8b",
                        "h100-hbm2e", gpus, lay, wps)
        out.append(Run(r.source, replace(r.job, kernels="fused"), lay, r.measured_step_s, peak_gib=gib))
    return out


def _fms_fsdp() -> list[Run]:
    # fms-fsdp's defaults (fms_fsdp/config/training.py, policies/mixed_precision.py): sharding "hsdp"
    # (8 GPUs of a node shard, the nodes replicate), fsdp_activation_checkpointing False, bf16
    # parameters and bf16 gradient reduction (bfSixteen), SDPA's FlashAttention-2; eager kernels
    # (torch.compile came in a later post, 68% MFU with it). The blog's clusters: 80 GB A100s "with
    # 400Gbps inter-node interconnect", 80 GB H100s with 800 Gbps, read as per node (a DGX A100 has
    # 200 Gb/s per GPU; 400 per GPU would be twice it): 50 and 100 Gb/s per GPU. One micro-batch a step.
    a100 = replace(get_gpu("a100-80gb"), scaleout_gbps=400 / 8 / 8)  # GB/s per GPU
    h100 = replace(get_gpu("h100"), scaleout_gbps=800 / 8 / 8)
    out = []
    for gpu, gpus, name, mbs, wps in ((a100, 128, "llama-2-7b", 2, 3760), (a100, 128, "llama-2-13b", 1, 1700),
                                      (h100, 96, "llama-2-7b", 2, 7500)):
        shape = get_shape(name).with_(seq_len=4096)
        lay = Layout(dp_replicate=gpus // 8, dp_shard=8, zero=3, mbs=mbs, recompute="none")
        job = Job(shape, gpu, gpus, gpus * mbs * 4096, kernels="eager", reduce_dtype="bf16")
        label = (f"fms-fsdp Llama 2 {name.split('-')[-1].upper()} on {gpus} "
                 f"{'A100' if gpu is a100 else 'H100'}, HSDP, mbs {mbs}")
        out.append(Run(label, job, lay, job.batch_tokens / (gpus * wps)))
    return out


def held_out() -> list[Run]:
    mt_nlg = [_mt_nlg(n, s) for n, s in ((280, 60.1), (350, 50.2), (420, 44.4))]
    return ([_foundry(r) for r in foundry_rows()] + mt_nlg + _torchtitan_llama2() + _torchtitan_compiled()
            + _fms_fsdp())
