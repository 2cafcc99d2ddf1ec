"""The loss modules over ampy/nn/_functional_loss_more.py (torch.nn's
signatures)."""
from .. import _functional_loss_more as L
from .module import Module

__all__ = ['MarginRankingLoss', 'HingeEmbeddingLoss', 'CosineEmbeddingLoss', 'TripletMarginLoss', 'SoftMarginLoss', 'MultiLabelSoftMarginLoss', 'MultiMarginLoss', 'MultiLabelMarginLoss', 'PoissonNLLLoss', 'TripletMarginWithDistanceLoss', 'GaussianNLLLoss']

class MarginRankingLoss(Module):
    """torch.nn.MarginRankingLoss: margin_ranking_loss as a module."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, input1, input2, target):
        return L.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(Module):
    """torch.nn.HingeEmbeddingLoss: hinge_embedding_loss as a module."""

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, input, target):
        return L.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(Module):
    """torch.nn.CosineEmbeddingLoss: cosine_embedding_loss as a module."""

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, input1, input2, target):
        return L.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(Module):
    """torch.nn.TripletMarginLoss: triplet_margin_loss as a module."""

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap
        self.reduction = reduction

    def forward(self, anchor, positive, negative):
        return L.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps, swap=self.swap, reduction=self.reduction)


class SoftMarginLoss(Module):
    """torch.nn.SoftMarginLoss: soft_margin_loss as a module."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return L.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(Module):
    """torch.nn.MultiLabelSoftMarginLoss: multilabel_soft_margin_loss as a module."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, input, target):
        return L.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class MultiMarginLoss(Module):
    """torch.nn.MultiMarginLoss: multi_margin_loss as a module."""

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.p = p
        self.margin = margin
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, input, target):
        return L.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(Module):
    """torch.nn.MultiLabelMarginLoss: multilabel_margin_loss as a module."""

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return L.multilabel_margin_loss(input, target, reduction=self.reduction)


class PoissonNLLLoss(Module):
    """torch.nn.PoissonNLLLoss: poisson_nll_loss as a module."""

    def __init__(self, log_input=True, full=False, eps=1e-8, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.log_input = log_input
        self.full = full
        self.eps = eps
        self.reduction = reduction

    def forward(self, input, target):
        return L.poisson_nll_loss(input, target, log_input=self.log_input, full=self.full, eps=self.eps, reduction=self.reduction)


class TripletMarginWithDistanceLoss(Module):
    """torch.nn.TripletMarginWithDistanceLoss."""

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__()
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap
        self.reduction = reduction

    def forward(self, anchor, positive, negative):
        return L.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class GaussianNLLLoss(Module):
    """torch.nn.GaussianNLLLoss."""

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__()
        self.full = full
        self.eps = eps
        self.reduction = reduction

    def forward(self, input, target, var):
        return L.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
                                   reduction=self.reduction)
