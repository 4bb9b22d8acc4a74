set terminal pngcairo size 960,540 font 'DejaVu Sans,11'
set grid ytics
set key below horizontal
set output 'experiments/results/graph-best-node/trace-local-mixed-lognormal-100000-cc.png'
set title 'Convergence: cc on lognormal-100000, local-mixed'
set xlabel 'seconds since the parts were shipped'
set ylabel 'residual (sum |pending delta|, or pending vertices)'
set logscale y
plot 'experiments/results/graph-best-node/trace-local-mixed-lognormal-100000-cc.dat' index 0 using 1:2 with linespoints title 'all async auto profile', 'experiments/results/graph-best-node/trace-local-mixed-lognormal-100000-cc.dat' index 1 using 1:2 with linespoints title 'all sync auto profile'
