"""torchvision.models.resnet18, untrained (``weights=None``), built from the framework's own nn layers."""

from __future__ import annotations

from _ported_framework import framework

__all__ = ["resnet18"]


def resnet18(weights=None, num_classes: int = 1000, **kwargs):
    """ResNet-18 with torchvision's layer names (conv1, bn1, relu, maxpool, layer1-4, avgpool, fc)."""
    if weights is not None:
        raise ValueError("the torchvision shim has no pretrained weights (no network): use weights=None")
    nn = framework().nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            return self.relu(self.bn2(self.conv2(out)) + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
            for i, (inp, planes, stride) in enumerate(widths, 1):
                setattr(self, f"layer{i}", nn.Sequential(BasicBlock(inp, planes, stride), BasicBlock(planes, planes)))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(framework().flatten(self.avgpool(x), 1))

    return ResNet()
