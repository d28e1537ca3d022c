"""The published and measured training throughputs the GPU projection is fitted to and
checked against (benchmarks/bench_projection.py prints every one beside its projection;
tools/fit_projection.py fits the per-architecture constants to the "fit" rows).

Three kinds of figure:

- ``Published``: a framework's training throughput on one GPU (images or sequences per
  second), projected from the model's traced step at its GPU, precision, batch and XLA.
- ``Relative``: how much faster one GPU ran a model than another **in one harness**
  (same scripts and container, one GPU each): the ratio of the two throughputs against
  the ratio of the two projections. A ratio cancels what the harness adds to both (its
  implementation, data layout, warm-up counted in): the figures of Lambda's PyTorch
  harness are of faster BERT code than TensorFlow's, so they set how generations differ,
  not how fast a TensorFlow step is. Their "FP16" BERT is apex AMP O2 (the whole model
  in float16); projected as Keras' mixed precision. Their ResNet-50 mixed-precision
  figures are left out: NCHW layout makes them harness-bound (the A100's 1,582 img/s
  against NVIDIA's own 2,470 in PyTorch; the H200 and B200 level off at ~3,080); so are
  its TF32 ones on Hopper and Blackwell (the H100's 1,754-1,898 img/s against 2,519 for
  torchvision's ResNet-50 on the H100 measured for this project).
  A ratio cancels the harness only where the harness runs the reference GPU about as
  fast as the model projects it (the figures the reference's constants were set on):
  the fit tool leaves a pair out, said "not comparable", where the reference's own
  figure is more than 1.33x from its projection (Lambda's PyTorch BERT in TF32 ran
  1.7x faster on an A100 than NVIDIA's TensorFlow 2 BERT the A100 constants follow).
- ``Sweep``: one GPU at two batch sizes: the throughput at the smaller over the larger,
  against the projection's.

Which rows set which constant, and which are held out, is ``kind`` ("fit" or "held out");
docs/projection.md lists them with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass

FP32, AMP = "float32", "mixed_float16"


@dataclass(frozen=True)
class Published:
    model: str
    gpu: str
    precision: str
    batch: int
    xla: bool
    throughput: float  # images or sequences per second
    kind: str  # fit | held out
    second: bool = False  # of the second held-out set (issue #28), printed on its own too


PUBLISHED = [
    # fit: ResNet-50 v1.5, resnet50v1.5/README.md (HEAD), 1 GPU, XLA
    Published("resnet50", "A100-40GB", FP32, 256, True, 909.0, "fit"),  # TF32
    Published("resnet50", "A100-40GB", AMP, 256, True, 2375.0, "fit"),
    Published("resnet50", "V100", FP32, 128, True, 412.0, "fit"),
    Published("resnet50", "V100", AMP, 256, True, 1270.0, "fit"),
    # fit: EfficientNet-B0, 224x224, efficientnet_v1/README.md, XLA
    Published("efficientnet-b0", "A100", FP32, 512, True, 1209.0, "fit"),  # TF32
    Published("efficientnet-b0", "A100", AMP, 1024, True, 3454.0, "fit"),
    Published("efficientnet-b0", "V100", FP32, 256, True, 752.0, "fit"),
    Published("efficientnet-b0", "V100", AMP, 512, True, 868.0, "fit"),
    # fit (held out until the fit that added matmul/convolution efficiencies, the only
    # figures dominated by matmuls): BERT-Large SQuAD fine-tuning, sequence 384,
    # BERT/README.md, XLA
    Published("bert-large", "A100", FP32, 38, True, 43.9, "fit"),  # TF32
    Published("bert-large", "A100", AMP, 76, True, 134.22, "fit"),
    Published("bert-large", "V100", FP32, 3, True, 9.85, "fit"),  # V100 16GB
    Published("bert-large", "V100", AMP, 6, True, 39.10, "fit"),
    Published("bert-large", "V100", FP32, 8, True, 11.11, "fit"),  # V100 32GB
    Published("bert-large", "V100", AMP, 12, True, 47.06, "fit"),
    # held out: ELECTRA-base SQuAD fine-tuning, sequence 384, ELECTRA/README.md; its
    # script compiles with XLA only in mixed precision
    Published("electra-base", "A100-40GB", FP32, 32, False, 107.0, "held out"),  # TF32
    Published("electra-base", "A100-40GB", AMP, 32, True, 317.0, "held out"),
    Published("electra-base", "V100", FP32, 8, False, 35.0, "held out"),
    Published("electra-base", "V100", AMP, 16, True, 154.0, "held out"),
    # held out (added after the fit, printed against the model before any change to
    # it): EfficientNet-B4 at 380x380, efficientnet_v1/README.md (21.09-tf2-py3, XLA;
    # batch sizes from its B4/training/*/train_benchmark_8x*.sh)
    Published("efficientnet-b4", "A100", FP32, 80, True, 165.0, "held out"),  # TF32
    Published("efficientnet-b4", "A100", AMP, 160, True, 470.0, "held out"),
    Published("efficientnet-b4", "V100", FP32, 32, True, 79.0, "held out"),  # V100 32GB
    Published("efficientnet-b4", "V100", AMP, 64, True, 211.0, "held out"),
    # held out: EfficientNetV2-S at 300x300 (the last stage's size, at which the README
    # measured), efficientnet_v2/README.md (21.09-tf2-py3, XLA; batch sizes from its
    # S/training/*/train_benchmark_8x*.sh)
    Published("efficientnetv2-s", "A100", FP32, 230, True, 390.0, "held out"),  # TF32
    Published("efficientnetv2-s", "A100", AMP, 460, True, 950.0, "held out"),
    Published("efficientnetv2-s", "V100", FP32, 64, True, 156.0, "held out"),  # V100 32GB
    Published("efficientnetv2-s", "V100", AMP, 128, True, 380.0, "held out"),
    # held out: ResNeXt-101 32x4d and SE-ResNeXt-101 32x4d (grouped 3x3 convolutions,
    # 32 groups), TensorFlow/Classification/ConvNets/{resnext101-32x4d,
    # se-resnext101-32x4d}/README.md (20.06-tf1-py3, XLA). ResNeXt's V100 table does
    # not say whether XLA was on (its script measures both), so it is left out.
    Published("resnext101", "A100-40GB", FP32, 128, True, 371.0, "held out"),  # TF32
    Published("resnext101", "A100-40GB", AMP, 256, True, 1132.0, "held out"),
    Published("se-resnext101", "A100-40GB", FP32, 128, True, 342.0, "held out"),  # TF32
    Published("se-resnext101", "A100-40GB", AMP, 256, True, 975.0, "held out"),
    Published("se-resnext101", "V100", FP32, 64, True, 152.0, "held out"),  # V100 16GB
    Published("se-resnext101", "V100", AMP, 96, True, 475.0, "held out"),
    # held out: U-Net (572x572 grey input, unpadded convolutions, 388x388 two-class
    # output), TensorFlow2/Segmentation/UNet_Medical/README.md (21.02-tf2-py3, XLA:
    # examples/unet_TRAIN_BENCHMARK*.sh), 1 GPU, batch 8
    Published("unet-medical", "A100", FP32, 8, True, 63.33, "held out"),  # TF32
    Published("unet-medical", "A100", AMP, 8, True, 141.03, "held out"),
    Published("unet-medical", "V100", FP32, 8, True, 19.40, "held out"),  # V100 16GB
    Published("unet-medical", "V100", AMP, 8, True, 60.65, "held out"),
    # held out (added with the GPU table's new parts; printed against the model before
    # any change to it, docs/projection.md): ResNet-50 with one fused batch-norm kernel
    # per layer, as NVIDIA's and tf_cnn_benchmarks' implementations build it.
    # ResNet-50 v1.5 without XLA, resnet50v1.5/README.md at fed7ba99 (20.03-tf1-py3,
    # V100 16G)
    Published("resnet50v1.5-fused", "V100", FP32, 128, False, 369.62, "held out", True),
    Published("resnet50v1.5-fused", "V100", AMP, 256, False, 1099.55, "held out", True),
    # ResNet-50 v1.5, XLA, Lambda's deeplearning-benchmark (tensorflow/results/
    # QuadroRTX8000/TensorFlow_resnet50_{FP32,FP16}/14-02-2021_*.txt: 20.12-tf1-py3,
    # DeepLearningExamples' resnet50v1.5, batch 128 as logged, train_throughput); under
    # XLA traced as Keras builds it, like the fitted XLA figures (XLA fuses either way)
    Published("resnet50", "Quadro RTX 8000", FP32, 128, True, 326.79, "held out", True),
    Published("resnet50", "Quadro RTX 8000", AMP, 128, True, 943.78, "held out", True),
    # ResNet-50 (v1) in tf_cnn_benchmarks, --use_fp16, XLA off (its default),
    # nvcr.io/nvidia/tensorflow:23.02-tf1-py3, 1 GPU: server-gear.com, "RTX 4090 x4
    # exhaustive tf_cnn_benchmarks" (blog/post/rtx4090-x4-exhaustive-tf-cnn-benchmarks)
    Published("resnet50-fused", "RTX 3090", AMP, 64, False, 1026.83, "held out", True),
    Published("resnet50-fused", "RTX 3090", AMP, 256, False, 1181.90, "held out", True),
    Published("resnet50-fused", "RTX 4090", AMP, 64, False, 1688.03, "held out", True),
    Published("resnet50-fused", "RTX 4090", AMP, 256, False, 1776.41, "fit", True),  # Ada GeForce
    # BERT-Large SQuAD v1.1 fine-tuning, sequence 384, at small batches: NVIDIA's TF1
    # implementation, TensorFlow/LanguageModeling/BERT/README.md (20.06-py3; XLA:
    # scripts/finetune_train_benchmark.sh's default), 1 GPU
    Published("bert-large", "A100-40GB", FP32, 16, True, 61.364, "held out", True),  # TF32
    Published("bert-large", "A100-40GB", AMP, 32, True, 102.26, "held out", True),
    Published("bert-large", "V100", FP32, 2, True, 7.36, "held out", True),  # V100 16GB
    Published("bert-large", "V100", AMP, 4, True, 29.74, "held out", True),
    Published("bert-large", "V100", FP32, 10, True, 10.42, "held out", True),  # V100 32GB
    Published("bert-large", "V100", AMP, 24, True, 51.02, "held out", True),
]


# -- Hopper, Ada, Blackwell (issue #38) ---------------------------------------------------
# Measured on a real H100 SXM (80 GB HBM3) for this project: torchvision's ResNet-50
# (v1.5) at batch 256, PyTorch 2.11 eager (cuDNN's fused batch norm, no fusion of the
# rest: projected as the fused-batch-norm ResNet without XLA), data on the device
# (tests/data and ../shared/gpu/h100/README.md: torch_resnet50_setup_heavy, its
# training steps' own clock): TF32 2,519 img/s, float16 autocast 4,786 img/s.
PUBLISHED += [
    Published("resnet50v1.5-fused", "H100", FP32, 256, False, 2519.0, "fit"),  # TF32
    Published("resnet50v1.5-fused", "H100", AMP, 256, False, 4786.0, "fit"),
]
# Hopper, TF32 BERT SQuAD (sequence 384) in Lambda's PyTorch harness on current software
# (NVIDIA DeepLearningExamples' run_squad.py, no XLA but its fused layer norm and GELU:
# projected as the XLA-compiled encoder), lambdal/deeplearning-benchmark aa5addb6:
# fit: NGC 24.03 (PyTorch 2.3, CUDA 12.4), pytorch/results/1cc_H100_80GB_SXM5_v1/
PUBLISHED += [
    Published("bert-large", "H100", FP32, 64, True, 148.12, "fit"),
    Published("electra-base", "H100", FP32, 172, True, 436.11, "fit"),  # BERT-base
]
# held out: NGC 24.10 on an H100 SXM (results_v2/LambdaOD_1x_1xH100_80GB_SXM5_192-222-
# 52-83_v2, mean of 3), NGC 24.03 on an H100 PCIe (results_v2/LambdaOD_1x_Texas_1xH100_
# 80GB_PCIe_209-20-158-50_v2) and an H200 (results_v2/LambdaBM_ENG04_1xH200_140GB_SXM_
# h200_v2, its batch for 140 GB)
PUBLISHED += [
    Published("bert-large", "H100", FP32, 64, True, 140.60, "held out"),
    Published("electra-base", "H100", FP32, 172, True, 425.28, "held out"),
    Published("bert-large", "H100 PCIe", FP32, 64, True, 100.72, "held out"),
    Published("electra-base", "H100 PCIe", FP32, 172, True, 302.49, "held out"),
    Published("bert-large", "H200", FP32, 96, True, 181.57, "held out"),
    Published("electra-base", "H200", FP32, 296, True, 514.61, "held out"),
]


@dataclass(frozen=True)
class Relative:
    """``gpu`` ran ``model`` ``ratio`` times as fast as ``over`` in one harness."""

    model: str
    gpu: str
    batch: int
    over: str
    over_batch: int
    precision: str
    xla: bool  # how the model is projected (PyTorch's BERT: fused, as under XLA)
    ratio: float
    kind: str  # fit | held out
    source: str
    value: float = 0.0  # the two throughputs the ratio is of
    over_value: float = 0.0


_V1 = "Lambda deeplearning-benchmark aa5addb6 pytorch/results/ v1 (NGC 22.10, PyTorch 1.13)"
_V2 = "Lambda deeplearning-benchmark aa5addb6 pytorch/results_v2/"
_RN, _BL, _BB = "resnet50v1.5-fused", "bert-large", "electra-base"  # BERT-base's shape


def _pair(model, gpu, batch, value, over, over_batch, over_value, precision, kind, source):
    xla = model != _RN
    return Relative(model, gpu, batch, over, over_batch, precision, xla,
                    round(value / over_value, 4), kind, source, value, over_value)  # fmt: skip


RELATIVE: list[Relative] = [
    # Hopper, fit (float16 matmuls: no current-software figure of a mixed-precision
    # transformer on an H100): H100 SXM5 over A100 SXM4 80GB, v1, same batch
    # (H100_80GB_SXM5_v1, A100_80GB_SXM4_v1)
    _pair(_BL, "H100", 112, 301.10, "A100", 112, 152.85, AMP, "fit", _V1),
    _pair(_BB, "H100", 320, 812.98, "A100", 320, 443.72, AMP, "fit", _V1),
    # Hopper, held out: the same pairs in TF32, the H100 on its first software (CUDA
    # 11.8, PyTorch 1.13: its TF32 figures rose 4-8% on NGC 24.03)
    _pair(_BL, "H100", 64, 141.84, "A100", 64, 75.59, FP32, "held out", _V1),
    _pair(_BB, "H100", 172, 408.31, "A100", 172, 239.78, FP32, "held out", _V1),
    # Hopper, held out: H100 PCIe over A100 80GB PCIe, v1 (H100_80GB_PCIe5_v1,
    # A100_80GB_PCIe_v1)
    _pair(_BL, "H100 PCIe", 64, 97.20, "A100", 64, 70.87, FP32, "held out", _V1),
    _pair(_BL, "H100 PCIe", 112, 203.26, "A100", 112, 140.44, AMP, "held out", _V1),
    _pair(_BB, "H100 PCIe", 172, 292.93, "A100", 172, 224.01, FP32, "held out", _V1),
    _pair(_BB, "H100 PCIe", 320, 567.39, "A100", 320, 415.70, AMP, "held out", _V1),
    # Hopper, held out: H200 over H100 SXM5, v2, both NGC 24.03 (LambdaBM_ENG04_1xH200_
    # 140GB_SXM_h200_v2, LambdaOD_Texas_1xH100_80GB_SXM5_192-222-52-102_v2), the H200 at
    # its batch for 140 GB
    _pair(_BL, "H200", 192, 350.32, "H100", 112, 311.08, AMP, "held out", _V2),
    _pair(_BB, "H200", 592, 932.19, "H100", 320, 842.02, AMP, "held out", _V2),
    # Ada, fit: RTX 4090 (GeForce) and RTX 6000 Ada (professional, 300 W) over A100
    # SXM4 80GB, v1 (4090_v1, AdaA6000_v1: the batches their memory allows)
    _pair(_RN, "RTX 4090", 224, 721.24, "A100", 640, 1066.99, FP32, "fit", _V1),
    _pair(_BL, "RTX 4090", 16, 44.99, "A100", 64, 75.59, FP32, "fit", _V1),
    _pair(_BL, "RTX 4090", 28, 93.59, "A100", 112, 152.85, AMP, "fit", _V1),
    _pair(_RN, "RTX 6000 Ada", 496, 647.31, "A100", 640, 1066.99, FP32, "fit", _V1),
    _pair(_BL, "RTX 6000 Ada", 32, 44.54, "A100", 64, 75.59, FP32, "fit", _V1),
    _pair(_BL, "RTX 6000 Ada", 64, 79.03, "A100", 112, 152.85, AMP, "fit", _V1),
    # Ada, held out: BERT-base on both
    _pair(_BB, "RTX 4090", 48, 137.16, "A100", 172, 239.78, FP32, "held out", _V1),
    _pair(_BB, "RTX 4090", 96, 297.67, "A100", 320, 443.72, AMP, "held out", _V1),
    _pair(_BB, "RTX 6000 Ada", 96, 136.21, "A100", 172, 239.78, FP32, "held out", _V1),
    _pair(_BB, "RTX 6000 Ada", 192, 255.52, "A100", 320, 443.72, AMP, "held out", _V1),
    # Volta, held out: V100 SXM2 16GB (FP32, no TF32) over A100 SXM4 80GB (TF32), v1
    # (LambdaCloud_V100_16GB_v1)
    _pair(_RN, "V100", 128, 369.66, "A100", 640, 1066.99, FP32, "held out", _V1),
    _pair(_BL, "V100", 8, 12.42, "A100", 64, 75.59, FP32, "held out", _V1),
    _pair(_BL, "V100", 16, 57.87, "A100", 112, 152.85, AMP, "held out", _V1),
    _pair(_BB, "V100", 24, 42.70, "A100", 172, 239.78, FP32, "held out", _V1),
    _pair(_BB, "V100", 48, 189.94, "A100", 320, 443.72, AMP, "held out", _V1),
    # Blackwell, fit: B200 over H100 SXM5, v2 (B200: NGC 25.06, 1 run each,
    # LambdaOD_test_1xB200_192GB_129-213-83-251_v2; H100: NGC 24.10, mean of 3 runs,
    # LambdaOD_1x_1xH100_80GB_SXM5_192-222-52-83_v2): the containers differ
    # (BERT-Large's mixed-precision pair is not comparable: the H100's apex O2 figure,
    # the whole model in float16, is 1.4x its Keras-style projection)
    _pair(_BL, "B200", 128, 281.94, "H100", 64, 140.60, FP32, "fit", _V2),
    _pair(_BB, "B200", 768, 1405.83, "H100", 320, 915.74, AMP, "fit", _V2),
    _pair(_BL, "B200", 256, 523.11, "H100", 112, 321.02, AMP, "held out", _V2),
    # Blackwell, held out
    _pair(_BB, "B200", 384, 855.34, "H100", 172, 425.28, FP32, "held out", _V2),
]


@dataclass(frozen=True)
class Sweep:
    """``gpu`` ran ``model`` at ``batch`` ``ratio`` times the throughput at ``over_batch``."""

    model: str
    gpu: str
    precision: str
    xla: bool
    batch: int
    over_batch: int
    ratio: float
    source: str


_TF_CNN = "tf_cnn_benchmarks, server-gear.com 'RTX 4090 x4 exhaustive tf_cnn_benchmarks'"
SWEEPS: list[Sweep] = [
    # ResNet-50 (v1) in tf_cnn_benchmarks, --use_fp16, XLA off, 1 GPU: the rows of the
    # second held-out set above, each GPU's batch 64 over its batch 256
    Sweep("resnet50-fused", "RTX 3090", AMP, False, 64, 256, round(1026.83 / 1181.90, 4), _TF_CNN),
    Sweep("resnet50-fused", "RTX 4090", AMP, False, 64, 256, round(1688.03 / 1776.41, 4), _TF_CNN),
]
