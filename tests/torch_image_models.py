"""The image classifiers of tapegrad's nn/image_classifiers.h in PyTorch, for the suites that
compare with them (tests/nn_layers_reference.py, tests/image_train_reference.py): Net is
pytorch/examples' mnist/main.py Net; Mlp is flatten, fc1, relu, fc2. Their state_dict names are
tapegrad's.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """pytorch/examples' mnist/main.py Net."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return self.fc2(x)


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))
