A=(x "y z")
B=${A[@]:-d}$((1+2*(3%2)))
sbatch <<EOF
#SBATCH -N2
srun python pretrain_gpt.py --a $B `x` $(y)
EOF
